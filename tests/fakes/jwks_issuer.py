"""An OAuth issuer's public side on 127.0.0.1, from a key the test makes: RFC 8414 metadata
(`/.well-known/oauth-authorization-server`) naming its JWKS (`/jwks.json`), and `mint` to sign tokens
with it. A real HTTP server, so the gateway's discovery, key cache and refetch are what is tested.

`rotate()` adds a new key (a new `kid`) that signs from then on; `fetches` counts JWKS requests.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey


def new_key() -> RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def public_pem(key: RSAPrivateKey) -> bytes:
    return key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


class JwksIssuer:
    def __init__(self) -> None:
        self.keys: dict[str, RSAPrivateKey] = {"key-1": new_key()}
        self.kid = "key-1"
        self.fetches = 0
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def start(self) -> JwksIssuer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def rotate(self) -> None:
        self.kid = f"key-{len(self.keys) + 1}"
        self.keys[self.kid] = new_key()

    def claims(self, subject: str, audience: str, **extra: Any) -> dict[str, Any]:
        now = int(time.time())
        return {"iss": self.url, "sub": subject, "aud": audience, "iat": now, "exp": now + 600} | extra

    def mint(self, subject: str, audience: str, **extra: Any) -> str:
        """A token as the issuer signs it (RS256, its current key); `extra` overrides or adds claims."""
        return jwt.encode(
            self.claims(subject, audience, **extra), self.keys[self.kid], algorithm="RS256", headers={"kid": self.kid}
        )

    def jwks(self) -> dict[str, Any]:
        keys = []
        for kid, key in self.keys.items():
            entry = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
            keys.append(entry | {"kid": kid, "alg": "RS256", "use": "sig"})
        return {"keys": keys}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        issuer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path == "/.well-known/oauth-authorization-server":
                    body: dict[str, Any] = {
                        "issuer": issuer.url,
                        "jwks_uri": f"{issuer.url}/jwks.json",
                        "authorization_endpoint": f"{issuer.url}/authorize",
                        "token_endpoint": f"{issuer.url}/token",
                        "response_types_supported": ["code"],
                    }
                elif self.path == "/jwks.json":
                    issuer.fetches += 1
                    body = issuer.jwks()
                else:
                    self.send_error(404)
                    return
                data = json.dumps(body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler
