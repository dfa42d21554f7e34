"""The team gateway: who calls and what they may do, across replicas.

    principal       who made the request being served (a context variable; `local` over stdio)
    tokens_file     the per-person tokens file (`server.auth` type `tokens`): hashes, names, scopes
    http_auth       the bearer check's building blocks: the refusal answers and the back-off per address
    bearer          the bearer check in front of the MCP endpoint, over the shared token or the tokens file
    jwt_auth        the OAuth 2.1 resource server (`server.auth` type `jwt`): JWKS, issuer, audience, scopes
    authentication  `server.auth` and `server.publicUrl` as HTTP serving applies them
    limits          `server.limits`: calls counted per principal and per backend, in memory or Redis
    answer_ledger   the used answers of 2026-07-28 round trips, in memory or Redis
    shared_state    what replicas share: the state keys and the answer ledger
    cancellations   cancels that reach the replica running the call, over a Redis channel
    drain           one replica's health, readiness and drain on SIGTERM

A base layer: it imports only agentify._common, agentify.security, agentify.config and the error tree, so
every other part (telemetry, the gateway, the MCP adapter) can ask it who calls and what they may do.
"""
