"""Asking the user for the arguments a planner could not read from the task (`NeedsArguments`).

The planner was sure of the tool; what it lacked is a value only the user knows ("what's the forecast?": which
city?). `orchestrate_task` asks for exactly those arguments in one form, built from the tool's own input schema
(`planner/form.py`: their types, choices and descriptions), as agentify's own question. Its message says the
fields are as the backend describes them, so a backend's titles and descriptions never speak in agentify's voice.
It goes through the same `Answerer` as a backend's questions (`own=True`), so the client's capability is checked,
what it shows is masked, escaped and bounded, and a 2026-07-28 client answers in its next round. The answers are
merged into the plan and validated against the tool's schema like any plan; a tool that needs confirmation asks
for it next, showing the completed call.
"""

from __future__ import annotations

import dataclasses

import mcp_types as types

from agentify.backends.questions import Answerer
from agentify.errors import Declined, InvalidInput
from agentify.planner import NeedsArguments, Plan
from agentify.planner.catalog import Catalog
from agentify.planner.form import NotAskable, answered, form_schema
from agentify.team import operations

KEY = "arguments"


async def completed(unfilled: NeedsArguments, catalog: Catalog, answerer: Answerer | None) -> Plan:
    """The plan with the user's answers for its missing arguments, validated.

    Raises:
        NeedsArguments: the client cannot answer a form (no elicitation, URL mode only), or nobody answered in
            time: the `no_plan` it is, which says to put the values in the task.
        Declined: the user declined or dismissed the form.
        InvalidInput: the answers do not fit the tool's schema.
        AskingClient: (from the answerer) a 2026-07-28 client gets the form with this round's answer.
    """
    plan, missing = unfilled.plan, unfilled.missing
    tool = catalog.get(missing.name)
    if tool is None or answerer is None:
        raise unfilled
    try:
        schema = form_schema(tool.input_schema, missing.arguments)
    except NotAskable:  # the planner asks only for what a form may carry; a changed schema is refused as it was
        raise unfilled from None
    call = f"{plan.backend}.{plan.tool}"
    needs = ", ".join(missing.arguments)
    message = (
        f"agentify chose {call} for this task; it needs: {needs}, which the task does not say. The fields are as "
        f"backend {plan.backend!r} describes them (their titles and descriptions are its words, not agentify's). "
        "Fill them in to run it, or decline to run nothing."
    )
    request = types.ElicitRequest(params=types.ElicitRequestFormParams(message=message, requested_schema=schema))
    answers = await answerer.answer(plan.backend, {KEY: request}, own=True)
    if isinstance(answers, types.ErrorData):
        why = answers.message
        if answers.code == types.REQUEST_TIMEOUT:
            why += "; give more time with confirmTimeoutSeconds"
        said = f"agentify could not ask you for {needs} of {call} ({why}), so nothing was run: {unfilled.message}"
        raise NeedsArguments(said, unfilled.candidates, plan, missing)
    answer = answers.get(KEY)
    if not isinstance(answer, types.ElicitResult) or answer.action != "accept":
        operations.reached(plan.backend, plan.tool, missing.name)
        operations.decided("declined")
        verb = "declined" if isinstance(answer, types.ElicitResult) and answer.action == "decline" else "dismissed"
        raise Declined(
            f"you {verb} the question for {needs} of {call}, so nothing was run. To run it, {missing.instead()}.",
            missing=missing,
        )
    values = answered(schema, answer.content)
    if left := tuple(n for n in missing.arguments if n not in values):
        raise InvalidInput(
            f"you left {missing.said(left)} of {call} empty. Nothing was run; run the task again and fill in every "
            f"field, or {missing.instead()}."
        )
    arguments = unfilled.answered(values)
    if (problem := tool.validation_error(arguments)) is not None:
        raise InvalidInput(
            f"what you filled in for {call} does not fit the tool: {problem}. Nothing was run; run the task again "
            "and give a value the tool takes."
        )
    return dataclasses.replace(plan, arguments=arguments, reasoning=f"{plan.reasoning}; the user gave {needs}")
