"""What the gateway and the arbigent runner share: process groups, user directories, logging
set-up, JSON schemas from pydantic models. Imports nothing of either app."""
