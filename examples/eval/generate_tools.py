"""Regenerates the synthetic part of generated-tools.json: many backends modelled on common MCP servers.

The first backends of the file (github ... mail) were written by hand; this adds generated ones
(`"generated": true`) so the catalog holds more than 500 tools, the size of a real company's
gateway. Like the hand-written ones, none reads files, drives a browser or runs tests, so the
routing sets' labels stay right. Deterministic: running it twice gives the same file.

    python examples/eval/generate_tools.py
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

FILE = Path(__file__).with_name("generated-tools.json")

# backend id, what it is, the kind of thing it holds, and its entities with one field each that names them.
SERVICES: list[tuple[str, str, list[tuple[str, str]]]] = [
    (
        "gitlab",
        "GitLab: projects, merge requests and pipelines",
        [("project", "path"), ("merge_request", "iid"), ("pipeline", "id"), ("branch", "name"), ("label", "name")],
    ),
    (
        "linear",
        "Linear issue tracker of the product team",
        [("issue", "identifier"), ("cycle", "id"), ("team", "key"), ("comment", "id"), ("label", "name")],
    ),
    (
        "asana",
        "Asana tasks and projects of marketing",
        [("task", "gid"), ("project", "gid"), ("section", "gid"), ("tag", "gid")],
    ),
    (
        "trello",
        "Trello boards of the design team",
        [("board", "id"), ("card", "id"), ("list", "id"), ("checklist", "id")],
    ),
    (
        "confluence",
        "Confluence wiki: spaces and pages",
        [("space", "key"), ("page", "id"), ("blogpost", "id"), ("attachment", "id")],
    ),
    (
        "stripe",
        "Stripe payments of the shop",
        [
            ("customer", "id"),
            ("charge", "id"),
            ("refund", "id"),
            ("invoice", "id"),
            ("subscription", "id"),
            ("coupon", "id"),
        ],
    ),
    (
        "shopify",
        "Shopify store admin",
        [("product", "id"), ("order", "id"), ("collection", "id"), ("discount", "code"), ("fulfillment", "id")],
    ),
    (
        "salesforce",
        "Salesforce CRM",
        [("account", "id"), ("contact", "id"), ("opportunity", "id"), ("lead", "id"), ("case", "number")],
    ),
    (
        "hubspot",
        "HubSpot marketing CRM",
        [("contact", "email"), ("deal", "id"), ("company", "domain"), ("campaign", "id")],
    ),
    (
        "zendesk",
        "Zendesk customer support",
        [("ticket", "id"), ("macro", "id"), ("agent", "email"), ("satisfaction_rating", "id")],
    ),
    (
        "intercom",
        "Intercom customer conversations",
        [("conversation", "id"), ("contact", "id"), ("article", "id"), ("segment", "id")],
    ),
    (
        "pagerduty",
        "PagerDuty on-call and incidents",
        [("incident", "id"), ("schedule", "id"), ("service", "id"), ("escalation_policy", "id")],
    ),
    (
        "datadog",
        "Datadog monitoring of production",
        [("monitor", "id"), ("dashboard", "id"), ("metric", "name"), ("slo", "id"), ("downtime", "id")],
    ),
    (
        "grafana",
        "Grafana dashboards and alerts",
        [("dashboard", "uid"), ("alert_rule", "uid"), ("datasource", "uid"), ("annotation", "id")],
    ),
    (
        "elasticsearch",
        "Elasticsearch cluster of the search service",
        [("index", "name"), ("document", "id"), ("alias", "name"), ("snapshot", "name")],
    ),
    ("redis", "Redis cache of the shop backend", [("key", "name"), ("stream", "name"), ("channel", "name")]),
    (
        "mongodb",
        "MongoDB of the analytics service",
        [("collection", "name"), ("document", "id"), ("index", "name"), ("user", "name")],
    ),
    ("bigquery", "BigQuery data warehouse", [("dataset", "id"), ("table", "id"), ("job", "id"), ("view", "id")]),
    (
        "snowflake",
        "Snowflake warehouse of finance",
        [("warehouse", "name"), ("database", "name"), ("stage", "name"), ("task", "name")],
    ),
    ("airtable", "Airtable bases of operations", [("base", "id"), ("record", "id"), ("view", "id"), ("field", "name")]),
    ("figma", "Figma design files", [("component", "key"), ("comment", "id"), ("style", "key"), ("version", "id")]),
    (
        "discord",
        "Discord community server",
        [("channel", "id"), ("message", "id"), ("role", "id"), ("member", "id"), ("thread", "id")],
    ),
    ("teams", "Microsoft Teams chats", [("team", "id"), ("channel", "id"), ("chat", "id"), ("meeting", "id")]),
    (
        "zoom",
        "Zoom meetings and recordings",
        [("meeting", "id"), ("webinar", "id"), ("recording", "id"), ("participant", "id")],
    ),
    (
        "twilio",
        "Twilio SMS and voice",
        [("sms", "sid"), ("call", "sid"), ("phone_number", "sid"), ("conversation", "sid")],
    ),
    (
        "sendgrid",
        "SendGrid transactional email",
        [("template", "id"), ("contact_list", "id"), ("suppression", "email"), ("sender", "id")],
    ),
    (
        "cloudflare",
        "Cloudflare DNS and edge",
        [("zone", "id"), ("dns_record", "id"), ("firewall_rule", "id"), ("worker", "name"), ("cache_purge", "id")],
    ),
    (
        "vercel",
        "Vercel deployments of the web app",
        [("deployment", "id"), ("domain", "name"), ("env_var", "key"), ("project", "name")],
    ),
    (
        "aws",
        "AWS account of production",
        [
            ("ec2_instance", "id"),
            ("s3_bucket", "name"),
            ("lambda_function", "name"),
            ("iam_role", "name"),
            ("cloudwatch_alarm", "name"),
            ("rds_instance", "id"),
        ],
    ),
    (
        "gcp",
        "Google Cloud project of staging",
        [("compute_instance", "name"), ("cloud_run_service", "name"), ("pubsub_topic", "name"), ("secret", "name")],
    ),
    (
        "terraform",
        "Terraform Cloud workspaces",
        [("workspace", "name"), ("run", "id"), ("variable", "key"), ("state_version", "id")],
    ),
    (
        "vault",
        "HashiCorp Vault secrets",
        [("secret", "path"), ("policy", "name"), ("token", "accessor"), ("lease", "id")],
    ),
    ("circleci", "CircleCI builds", [("pipeline", "id"), ("workflow", "id"), ("job", "number"), ("context", "name")]),
    ("jenkins", "Jenkins build server", [("job", "name"), ("build", "number"), ("node", "name"), ("credential", "id")]),
    (
        "sonarqube",
        "SonarQube code quality",
        [("project", "key"), ("quality_gate", "name"), ("hotspot", "key"), ("rule", "key")],
    ),
    (
        "npm",
        "npm registry of the company",
        [("package", "name"), ("dist_tag", "tag"), ("team", "name"), ("token", "id")],
    ),
    (
        "spotify",
        "Spotify account of the office",
        [("playlist", "id"), ("track", "id"), ("album", "id"), ("artist", "id")],
    ),
    ("weather", "Weather forecasts", [("forecast", "location"), ("alert", "id"), ("station", "id")]),
    ("maps", "Maps, places and routes", [("place", "id"), ("route", "id"), ("geocode", "address")]),
    ("translate", "Machine translation", [("glossary", "id"), ("translation_job", "id"), ("language", "code")]),
    (
        "hr",
        "HR system: people and time off",
        [("employee", "id"), ("time_off_request", "id"), ("department", "id"), ("review", "id")],
    ),
    (
        "expenses",
        "Expense reports of finance",
        [("expense", "id"), ("report", "id"), ("receipt", "id"), ("card", "id")],
    ),
]
VERBS: list[tuple[str, str, bool, bool]] = [  # verb, description pattern, read-only, destructive
    ("list", "List the {plural} of {service}, newest first, with filters", True, False),
    ("get", "Get one {entity} of {service} by its {key}", True, False),
    ("create", "Create a new {entity} in {service}", False, False),
    ("update", "Change the fields of a {entity} in {service}", False, True),
    ("delete", "Delete a {entity} from {service} for good", False, True),
    ("search", "Search the {plural} of {service} by text", True, False),
]


def _tool(
    backend: str, service: str, entity: str, key: str, verb: str, pattern: str, ro: bool, bad: bool
) -> dict[str, Any]:
    words = entity.replace("_", " ")
    plural = words + ("es" if words.endswith(("s", "x", "sh", "ch")) else "s")
    properties: dict[str, Any] = {}
    required: list[str] = []
    if verb in ("get", "update", "delete"):
        properties[f"{entity}_{key}"] = {"type": "string", "description": f"The {key} of the {words}"}
        required.append(f"{entity}_{key}")
    if verb in ("create", "update"):
        properties["fields"] = {"type": "object", "description": f"The {words}'s fields to set"}
        required += ["fields"] if verb == "create" else []
    if verb == "search":
        properties["query"] = {"type": "string", "description": "Text to look for"}
        required.append("query")
    if verb in ("list", "search"):
        properties["limit"] = {"type": "integer", "description": "At most this many"}
    description = pattern.format(entity=words, plural=plural, service=service, key=key)
    tool: dict[str, Any] = {
        "name": f"{verb}_{entity}",
        "description": description,
        "inputSchema": {"type": "object", "properties": properties, "required": required},
    }
    tool["annotations"] = {"readOnlyHint": ro, "destructiveHint": bad}
    return tool


def _count(backends: list[dict[str, Any]]) -> int:
    return sum(len(b["tools"]) for b in backends)


def main() -> None:
    data = json.loads(FILE.read_text())
    kept = [b for b in data["backends"] if not b.get("generated")]
    for backend, description, entities in SERVICES:
        service = description.split(":")[0].split(" of ")[0]
        tools = []
        for entity, key in entities:
            # list and get for every entity, and one more verb in turn: about 600 tools in all.
            turn = VERBS[2 + (_count(kept) + len(tools)) % (len(VERBS) - 2)]
            for verb, pattern, ro, bad in (*VERBS[:2], turn):
                tools.append(_tool(backend, service, entity, key, verb, pattern, ro, bad))
        kept.append({"id": backend, "description": description, "generated": True, "tools": tools})
    data["backends"] = kept
    data["$comment"] = (
        "Synthetic backends for measuring the planner at scale (agentify eval --extra-tools): tools modelled on "
        "common MCP servers, the first ten written by hand, the rest generated by generate_tools.py; none of them "
        "reads files, drives a browser or runs tests as the example backends do. Never executed."
    )
    FILE.write_text(json.dumps(data, indent=1) + "\n")
    total = sum(len(b["tools"]) for b in kept)
    print(f"{FILE.name}: {len(kept)} backends, {total} tools")


if __name__ == "__main__":
    main()
