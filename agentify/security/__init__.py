"""Redaction of secrets (`redact`), which configured values are credentials (`credentials`), and the
connection gate in front of every HTTP listener (`connections`)."""
