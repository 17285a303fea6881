"""Classifying a response takes time linear in it, whatever the upstream sends.

Each input below once made a scan of the classifier quadratic. Each is classified at
``KB64`` (what the hook reads of a body at most) and at a quarter of it, in the same run:
linear work takes about a quarter of the time, quadratic work a sixteenth
(``tests/_linear.py``); the quadratic versions took 2 to 4 seconds at this size. No bound on
the clock: a busy machine slows both alike.
"""

from __future__ import annotations

import json
from functools import partial
from typing import Any

import httpx
import pytest
from _http_responses import KB64, response
from _linear import assert_linear

import tdk.http
from tdk.errors import UpstreamError


def _repeated_fields(n: int) -> httpx.Response:
    # Copies of one 64-character field: joining 2**15 of them (2 MB of headers) by repeated
    # concatenation took 2.5 s. Here 2**13 at 64 KiB (512 KB of headers): quadratic work still
    # grows sixteen-fold from a quarter of it, while 2 MB of small objects would outgrow the
    # processor's caches and slow the larger size more than its work grows.
    return response(429, [("Retry-After", "1" * 64)] * (2**13 * n // KB64))


PATHOLOGICAL = [
    pytest.param(_repeated_fields, id="header_map-repeated-fields"),
    pytest.param(
        lambda n: response(429, [("x-ratelimit-" * (n // 12) + "y", "0")]),
        id="ratelimit-suffixed-name",
    ),
    pytest.param(
        lambda n: response(429, [("x-ratelimit-" * (n // 12) + "-limitx", "0")]),
        id="ratelimit-infixed-name",
    ),
    pytest.param(
        lambda n: response(502, body=b"<title>" * (n // 7), content_type="text/html"),
        id="title-unclosed",
    ),
    pytest.param(
        lambda n: response(502, body=b"<TITLE" * (n // 6), content_type="text/html"),
        id="title-without-bracket",
    ),
    pytest.param(
        lambda n: response(400, body=b"x", content_type="text/plain; charset" + " " * n),
        id="charset-spaces",
    ),
    pytest.param(
        lambda n: response(400, body=b"x", content_type="text/plain; " + "charset= " * (n // 9)),
        id="charset-repeated",
    ),
    pytest.param(
        lambda n: response(400, body=(b"<Code>" + b"a" * 199) * (n // 205),
                           content_type="text/xml"),
        id="xml-code-unclosed",
    ),
    pytest.param(
        lambda n: response(400, body=(b"<Message>" + b"a" * 3_999) * (n // 4_008),
                           content_type="application/xml"),
        id="xml-message-unclosed",
    ),
    pytest.param(
        lambda n: response(429, {"Retry-After": ",".join(str(i % 7) for i in range(n * 27_720
                                                                                  // KB64))}),
        id="single-value-many-groupings",
    ),
    pytest.param(
        lambda n: response(429, {"Retry-After": "5, " * (n // 3)}), id="single-value-copies"
    ),
    pytest.param(lambda n: response(429, {"x-ratelimit-reset": "1h" * (n // 2)}), id="go-duration"),
    pytest.param(
        lambda n: response(429, {"x-ratelimit-reset": "1.5ms" * (n // 5) + "x"}),
        id="go-duration-invalid",
    ),
    pytest.param(
        lambda n: response(429, {"Retry-After": "Tue, 14 Nov 2023" + " " * n + "x"}),
        id="http-date-spaces",
    ),
    pytest.param(
        lambda n: response(429, {"Retry-After": "Tue, " + "14 Nov 2023 " * (n // 12)}),
        id="http-date-repeated",
    ),
    pytest.param(
        lambda n: response(429, {"x-ratelimit-reset": "2023-11-14T22:13" + "0" * n}),
        id="iso-timestamp-tail",
    ),
    pytest.param(
        lambda n: response(429, {"RateLimit": '"a";r=0;t=1, ' * (n // 14)}),
        id="ietf-many-items",
    ),
    pytest.param(
        lambda n: response(429, {"RateLimit": "r=0" + ";" * n, "RateLimit-Policy": "," * n}),
        id="ietf-separators",
    ),
    pytest.param(
        lambda n: response(429, [(f"x-ratelimit-reset-b{i}", "1") for i in range(n // 24)]),
        id="many-buckets",
    ),
    pytest.param(
        lambda n: response(429, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "\x01" * n}),
        id="reset-control-characters",
    ),
    pytest.param(
        lambda n: response(400, body=json.dumps({"message": "\x01 " * (n // 2)}).encode(),
                           content_type="application/json"),
        id="clean-control-characters",
    ),
    pytest.param(
        lambda n: response(400, body=json.dumps({"message": "\u202e" * n}).encode(),
                           content_type="application/json"),
        id="clean-bidi-characters",
    ),
    pytest.param(
        lambda n: response(400, body=b"\n" * n + b"x", content_type="text/plain"), id="blank-lines"
    ),
    pytest.param(
        lambda n: response(422, body=json.dumps({"errors": {str(i): ["x"] for i in range(n // 16)}
                                                 }).encode(), content_type="application/json"),
        id="shopify-field-map",
    ),
    pytest.param(
        lambda n: response(400, {"x-request-id": "\x01 " * (n // 2),
                                 "content-encoding": "," * n, "x-should-retry": " " * n}),
        id="other-headers",
    ),
]  # fmt: skip


@pytest.mark.parametrize("make", PATHOLOGICAL)
def test_pathological_input_takes_linear_time(make: Any) -> None:
    """Each input that made a scan quadratic is classified for real (not by the last resort),
    and four times as much of it takes about four times as long (quadratic: sixteen)."""
    error = tdk.http.classify(make(KB64))
    assert isinstance(error, UpstreamError)
    assert "fallback" not in error.details
    assert_linear(lambda n: partial(tdk.http.classify, make(n)), KB64)
