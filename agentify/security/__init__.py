"""Redaction of secrets (`redact`), which configured values are credentials (`credentials`), the
HTTP bearer check (`http_auth`), and the connection gate in front of every HTTP listener
(`connections`)."""
