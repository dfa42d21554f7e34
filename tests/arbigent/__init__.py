"""Tests of the arbigent runner (agentify/arbigent)."""
