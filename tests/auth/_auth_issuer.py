"""A JWT issuer on loopback for the tests of ``tdk.auth``: keys the tests generate (RSA and
EC), its metadata and JWKS served by a real HTTP server (stdlib ``http.server`` in a thread),
and tokens signed with its keys (PyJWT), or forged in the ways attackers forge them.

The server can misbehave on request: its JWKS down (503), HTML, garbage, too large, or
hanging; its metadata at the OpenID Connect path only, or nowhere. It counts the requests
of each path.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import hashlib
import hmac
import json
import threading
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar, Literal

import jwt
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

#: The audience of the tokens: the protected resource the tests serve.
AUDIENCE = "https://tools.example.test/mcp"
#: Seconds a hanging answer holds (released when the issuer closes).
HANG = 60.0

JwksMode = Literal[
    "ok",
    "with-oct",
    "down",
    "html",
    "garbage",
    "huge",
    "streamed-huge",
    "hang",
    "not-a-set",
    "for-encryption",
    "keys-not-a-list",
    "array",
    "gzip",
]
#: The symmetric key a careless issuer publishes in its JWKS in ``with-oct`` mode.
OCT_SECRET = b"published-hmac-secret-0123456789abcdef"
MetadataAt = Literal["oauth", "openid", "nowhere", "insecure-jwks-uri"]


def b64(data: bytes) -> str:
    """Base64url without padding, as JOSE writes it."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _segments(header: Mapping[str, Any], claims: Mapping[str, Any]) -> str:
    return f"{b64(json.dumps(header).encode())}.{b64(json.dumps(claims).encode())}"


def rsa_key(bits: int = 2048) -> rsa.RSAPrivateKey:
    """A new RSA private key."""
    return rsa.generate_private_key(public_exponent=65537, key_size=bits)


def signed_rs256(key: rsa.RSAPrivateKey, header: Mapping[str, Any], claims: Any) -> str:
    """A JWT signed RS256 by ``key`` with exactly ``header`` (written here, not by PyJWT:
    whatever the key's size, and whatever the header says)."""
    body = _segments(header, claims)
    signature = key.sign(body.encode(), padding.PKCS1v15(), hashes.SHA256())
    return f"{body}.{b64(signature)}"


@functools.cache
def _keys() -> tuple[rsa.RSAPrivateKey, ec.EllipticCurvePrivateKey, rsa.RSAPrivateKey]:
    """The issuers' keys: RSA, EC and a weak RSA one (made once: RSA keys take a while)."""
    return rsa_key(), ec.generate_private_key(ec.SECP256R1()), rsa_key(1024)


class Issuer:
    """A JWT issuer on ``http://127.0.0.1:PORT`` (see the module docstring)."""

    def __init__(self) -> None:
        self.rsa, self.ec, self.weak = _keys()
        self.keys: dict[str, Any] = {"rsa-1": self.rsa, "ec-1": self.ec, "weak-1": self.weak}
        self.jwks_mode: JwksMode = "ok"
        self.metadata_at: MetadataAt = "oauth"
        self.requests: Counter[str] = Counter()
        self.released = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self.jwks_url = f"{self.url}/jwks"
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    def __enter__(self) -> Issuer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.released.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(10)

    def jwks(self) -> dict[str, Any]:
        """The public keys, as a JWKS."""
        keys = []
        for kid, key in self.keys.items():
            public = key.public_key()
            writer = ECAlgorithm if isinstance(public, ec.EllipticCurvePublicKey) else RSAAlgorithm
            jwk = writer.to_jwk(public, as_dict=True)
            keys.append({**jwk, "kid": kid, "use": "sig"})
        if self.jwks_mode == "with-oct":
            keys.append({"kty": "oct", "k": b64(OCT_SECRET), "kid": "oct-1", "alg": "HS256"})
        return {"keys": keys}

    def rotate(self) -> str:
        """A new RSA key in the JWKS (the old ones stay); its key id."""
        kid = f"rsa-{len(self.keys) + 1}"
        self.keys[kid] = rsa_key()
        return kid

    def claims(self, **changes: Any) -> dict[str, Any]:
        """Valid claims for alice, with ``changes`` (a value None removes the claim)."""
        now = int(time.time())
        claims = {
            "iss": self.url,
            "aud": AUDIENCE,
            "sub": "alice",
            "exp": now + 600,
            "iat": now,
            "scope": "tools:read",
            "client_id": "mcp-client",
            "email": "alice@example.test",
        }
        claims.update(changes)
        return {name: value for name, value in claims.items() if value is not None}

    def token(
        self, kid: str = "rsa-1", *, header: Mapping[str, Any] | None = None, **changes: Any
    ) -> str:
        """A token signed by the key ``kid`` (RS256 or ES256 by its type), with the claims of
        :meth:`claims` and ``changes``."""
        key = self.keys[kid]
        algorithm = "ES256" if isinstance(key, ec.EllipticCurvePrivateKey) else "RS256"
        if key is self.weak:
            return signed_rs256(
                key, {"alg": "RS256", "typ": "JWT", "kid": kid}, self.claims(**changes)
            )
        return jwt.encode(
            self.claims(**changes), key, algorithm=algorithm, headers={"kid": kid, **(header or {})}
        )

    def unsigned(self, **changes: Any) -> str:
        """A token with ``alg: none`` naming a real key id, and no signature."""
        return (
            _segments({"alg": "none", "typ": "JWT", "kid": "rsa-1"}, self.claims(**changes)) + "."
        )

    def hs256_with_public_key(self, **changes: Any) -> str:
        """A token MACed with HS256 using the issuer's public RSA key (PEM) as the secret: the
        forgery that works where a library takes the algorithm from the token."""
        secret = self.rsa.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        body = _segments({"alg": "HS256", "typ": "JWT", "kid": "rsa-1"}, self.claims(**changes))
        mac = hmac.new(secret, body.encode(), hashlib.sha256).digest()
        return f"{body}.{b64(mac)}"

    def hs256_with_published_secret(self, **changes: Any) -> str:
        """A token MACed with HS256 using the symmetric key of the ``with-oct`` JWKS: anyone
        who read the JWKS can make it."""
        body = _segments({"alg": "HS256", "typ": "JWT", "kid": "oct-1"}, self.claims(**changes))
        return f"{body}.{b64(hmac.new(OCT_SECRET, body.encode(), hashlib.sha256).digest())}"

    def signed_by_stranger(self, **changes: Any) -> str:
        """A token naming the issuer's key id, signed by another RSA key."""
        return signed_rs256(
            rsa_key(), {"alg": "RS256", "typ": "JWT", "kid": "rsa-1"}, self.claims(**changes)
        )

    def tampered(self) -> str:
        """A valid token whose payload says another ``sub`` after signing."""
        header, _, signature = self.token().split(".")
        claims = b64(json.dumps(self.claims(sub="mallory")).encode())
        return f"{header}.{claims}.{signature}"


def _handler_for(issuer: Issuer) -> type[BaseHTTPRequestHandler]:
    class Handler(_IssuerHandler):
        owner: ClassVar[Issuer] = issuer

    return Handler


class _IssuerHandler(BaseHTTPRequestHandler):
    """The issuer's routes: its metadata at the well-known paths, its JWKS."""

    protocol_version = "HTTP/1.1"
    owner: ClassVar[Issuer]

    def log_message(self, format: str, *args: object) -> None:
        """Keep test output quiet."""

    def _answer(
        self, status: int, body: bytes, media: str = "application/json", **headers: str
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", media)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        for name, value in headers.items():
            self.send_header(name.replace("_", "-"), value)
        self.end_headers()
        with contextlib.suppress(OSError):
            self.wfile.write(body)

    def do_GET(self) -> None:
        """Answer one request."""
        issuer = self.owner
        issuer.requests[self.path] += 1
        if self.path == "/jwks":
            self._jwks(issuer)
            return
        where = {
            "oauth": "/.well-known/oauth-authorization-server",
            "openid": "/.well-known/openid-configuration",
        }.get(issuer.metadata_at)
        if issuer.metadata_at == "insecure-jwks-uri":
            where = "/.well-known/oauth-authorization-server"
        if self.path == where:
            jwks_uri = issuer.jwks_url
            if issuer.metadata_at == "insecure-jwks-uri":
                jwks_uri = "http://keys.example.test/jwks"
            metadata = {"issuer": issuer.url, "jwks_uri": jwks_uri}
            self._answer(200, json.dumps(metadata).encode())
        else:
            self._answer(404, b'{"error": "not found"}')

    def _jwks(self, issuer: Issuer) -> None:
        mode = issuer.jwks_mode
        if mode in ("ok", "with-oct"):
            self._answer(200, json.dumps(issuer.jwks()).encode(), "application/jwk-set+json")
        elif mode == "down":
            self._answer(503, b"<html><body>Service Unavailable</body></html>", "text/html")
        elif mode == "html":
            self._answer(200, b"<html><body>Please log in</body></html>", "text/html")
        elif mode == "garbage":
            self._answer(200, b'{"keys": [{"kty": "RSA", "n": 1}, 7, "x"', "application/json")
        elif mode == "not-a-set":
            self._answer(200, b'{"keys": [{"kty": "oct", "k": "c2VjcmV0"}]}')
        elif mode == "for-encryption":
            keys = [{**key, "use": "enc"} for key in issuer.jwks()["keys"]]
            self._answer(200, json.dumps({"keys": keys}).encode())
        elif mode == "keys-not-a-list":
            self._answer(200, b'{"keys": {"kty": "RSA"}}')
        elif mode == "array":
            self._answer(200, json.dumps(issuer.jwks()["keys"]).encode())
        elif mode == "streamed-huge":  # no length: read until the connection closes
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Connection", "close")
            self.end_headers()
            with contextlib.suppress(OSError):
                for _ in range(64):
                    self.wfile.write(b" " * 16384)
        elif mode == "huge":
            self._answer(200, b'{"keys": [' + b" " * (1024 * 1024) + b"]}")
        elif mode == "gzip":
            self._answer(200, b"\x1f\x8b not really", "application/json", Content_Encoding="gzip")
        else:  # hang: headers, then nothing until released
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "1000")
            self.end_headers()
            issuer.released.wait(HANG)


@contextlib.contextmanager
def issuer_running() -> Iterator[Issuer]:
    """An :class:`Issuer`, serving while the block runs."""
    with Issuer() as issuer:
        yield issuer
