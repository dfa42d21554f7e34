"""The base layer that the gateway and the arbigent runner share: process groups, signals, POSIX-only
file flags and locks, user directories, tool naming, logging set-up, JSON schemas from pydantic
models, start-up errors. It imports no other part of agentify (ruff enforces it)."""
