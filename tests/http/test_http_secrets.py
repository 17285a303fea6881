"""Credentials the request carried never reach an error, its dict forms, or tdk's logs."""

from __future__ import annotations

import asyncio
import json
import logging
import pickle

import httpx
import pytest
import respx

import tdk.http
from tdk import ToolContext, tool
from tdk.errors import ErrorInfo, UpstreamError

# None of these has a well-known token shape: only exact-value scrubbing can catch them.
TOKEN = "tok-9f8e7d6c5b4a3210"
API_KEY = "xk-0a1b2c3d4e5f6789"
QUERY_KEY = "qk-13579bdf2468ace0"
PASSWORD = "pw-Sup3rS3cretValue"
SECRETS = (TOKEN, API_KEY, QUERY_KEY, PASSWORD)

URL = f"https://alice:{PASSWORD}@api.example.com/v1/search?api_key={QUERY_KEY}&q=weather&page=2"
ECHO = (
    f"Invalid token {TOKEN} (Authorization: Bearer {TOKEN}) for key {API_KEY}; "
    f"see https://alice:{PASSWORD}@api.example.com/v1/search?api_key={QUERY_KEY}"
)


def bearer(request: httpx.Request) -> httpx.Request:
    """Bearer auth: keeps the URL's userinfo in the URL instead of turning it into Basic."""
    request.headers["Authorization"] = f"Bearer {TOKEN}"
    return request


def answer(status: int) -> httpx.Response:
    headers = {"x-request-id": f"req-{TOKEN}"}
    if status == 502:
        page = f"<html><head><title>Bad gateway for {TOKEN}</title></head><body>{ECHO}</body>"
        return httpx.Response(status, headers=headers, html=page)
    body = {"error": {"message": ECHO, "code": f"bad_{API_KEY}", "type": PASSWORD}}
    return httpx.Response(status, headers=headers, json=body)


def renderings(error: UpstreamError) -> dict[str, str]:
    """Every form in which an error leaves the process."""
    return {
        "str": str(error),
        "repr": repr(error),
        "message": error.message,
        "developer_message": error.developer_message or "",
        "details": json.dumps(error.details),
        "to_dict": json.dumps(error.to_dict()),
        "error_info": error.to_error_info().model_dump_json(),
        "log_line": error.to_log_line(),
        "pickle": repr(pickle.loads(pickle.dumps(error)).__dict__),
    }


def assert_clean(texts: dict[str, str]) -> None:
    leaks = {where: secret for where, text in texts.items() for secret in SECRETS if secret in text}
    assert not leaks


@pytest.mark.parametrize("status", [400, 401, 404, 429, 502])
def test_hook_scrubs_every_credential(status: int, caplog: pytest.LogCaptureFixture) -> None:
    """Userinfo, ``api_key=``, ``Authorization`` and ``X-Api-Key`` values, echoed back by
    the upstream in body, code, type and request id, appear in no rendering and no log."""
    caplog.set_level(logging.DEBUG)
    with respx.mock(assert_all_called=True) as router:
        router.get(URL).mock(return_value=answer(status))
        client = tdk.http.install(httpx.Client(auth=bearer, headers={"X-Api-Key": API_KEY}))
        with client, pytest.raises(UpstreamError) as caught:
            client.get(URL)
        sent = router.calls.last.request
    error = caught.value
    assert sent.headers["authorization"] == f"Bearer {TOKEN}"
    assert sent.headers["x-api-key"] == API_KEY
    assert_clean(renderings(error))
    tdk_records = [record for record in caplog.records if record.name.startswith("tdk")]
    assert tdk_records  # the hook logged the failure at DEBUG...
    assert_clean({"log": "\n".join(record.getMessage() for record in tdk_records)})  # cleanly
    assert error.details["url"] == (
        "https://api.example.com/v1/search?api_key=[REDACTED]&q=weather&page=2"
    )
    assert error.details["request_id"] == "req-[REDACTED]"


def test_upstream_text_still_reaches_the_model_for_a_400() -> None:
    """Scrubbing keeps the rest of the upstream's words: a 400 quotes them, redacted."""
    with respx.mock(assert_all_called=True) as router:
        router.get(URL).mock(return_value=answer(400))
        client = tdk.http.install(httpx.Client(auth=bearer, headers={"X-Api-Key": API_KEY}))
        with client, pytest.raises(UpstreamError) as caught:
            client.get(URL)
    assert 'Upstream message: "Invalid token [REDACTED]' in caught.value.message


def test_async_hook_scrubs_basic_credentials_from_the_url() -> None:
    """Userinfo sent as ``Basic`` auth is scrubbed: the password and the decoded pair."""
    echo = f"user alice:{PASSWORD} with key {API_KEY} and {QUERY_KEY}"

    async def fetch() -> UpstreamError:
        with respx.mock(assert_all_called=True) as router:
            router.get(URL).mock(return_value=httpx.Response(401, json={"message": echo}))
            async with tdk.http.install(
                httpx.AsyncClient(headers={"X-Api-Key": API_KEY})
            ) as client:
                with pytest.raises(UpstreamError) as caught:
                    await client.get(URL)
            assert router.calls.last.request.headers["authorization"].startswith("Basic ")
        return caught.value

    error = asyncio.run(fetch())
    assert_clean(renderings(error))
    assert "user [REDACTED] with key [REDACTED] and [REDACTED]" in (error.developer_message or "")


def test_raise_for_status_path_scrubs_too() -> None:
    """A tool's own ``raise_for_status()`` (whose message holds the full URL) classifies
    without leaking either, also with extra context secrets."""
    with respx.mock(assert_all_called=True) as router:
        router.get(URL).mock(return_value=answer(429))
        with httpx.Client(auth=bearer, headers={"X-Api-Key": API_KEY}) as client:
            response = client.get(URL)
    with pytest.raises(httpx.HTTPStatusError) as caught:
        response.raise_for_status()
    assert PASSWORD in str(caught.value)  # httpx's own message leaks...
    info = ErrorInfo.from_exception(caught.value, secrets=["weather"])
    rendered = info.model_dump_json()
    assert_clean({"info": rendered})  # ...tdk's does not
    assert "weather" not in rendered


def test_cookie_and_other_secret_headers_are_scrubbed() -> None:
    """Each cookie value and vendor key header counts as a credential."""
    cookie = "sid=sess-77aa88bb99cc; theme=dark-mode-on"
    echo = "sess-77aa88bb99cc dark-mode-on shpat-1234abcd5678"
    headers = {"Cookie": cookie, "X-Shopify-Access-Token": "shpat-1234abcd5678"}
    with respx.mock(assert_all_called=True) as router:
        router.get("https://shop.example.com/admin").mock(
            return_value=httpx.Response(404, json={"errors": echo})
        )
        client = tdk.http.install(httpx.Client(headers=headers))
        with client, pytest.raises(UpstreamError) as caught:
            client.get("https://shop.example.com/admin")
    assert caught.value.message.endswith('Upstream message: "[REDACTED] [REDACTED] [REDACTED]"')


def test_token_shapes_are_scrubbed_by_pattern() -> None:
    """A credential the request did not carry is still caught by its shape."""
    leaked = "sk-ant-api03-abcdefghijklmnopqrstuvwxyz012345"
    with respx.mock(assert_all_called=True) as router:
        router.get("https://api.example.com/v1/x").mock(
            return_value=httpx.Response(400, json={"message": f"key {leaked} is revoked"})
        )
        with tdk.http.install(httpx.Client()) as client, pytest.raises(UpstreamError) as caught:
            client.get("https://api.example.com/v1/x")
    assert leaked not in json.dumps(caught.value.to_dict())
    assert "key [REDACTED] is revoked" in caught.value.message


def test_malformed_basic_credentials_are_scrubbed_whole() -> None:
    """An ``Authorization: Basic`` value that is not base64 is still a secret, kept out."""
    with respx.mock(assert_all_called=True) as router:
        router.get("https://api.example.com/v1/x").mock(
            return_value=httpx.Response(400, json={"message": "bad creds: not*base64!"})
        )
        client = tdk.http.install(httpx.Client(headers={"Authorization": "Basic not*base64!"}))
        with client, pytest.raises(UpstreamError) as caught:
            client.get("https://api.example.com/v1/x")
    assert caught.value.message.endswith('Upstream message: "bad creds: [REDACTED]"')


def test_non_ascii_credentials_given_as_bytes_are_scrubbed() -> None:
    """A key header set as UTF-8 bytes is scrubbed in its decoded form."""
    key = "ключ-0a1b2c3d"
    with respx.mock(assert_all_called=True) as router:
        router.get("https://api.example.com/v1/x").mock(
            return_value=httpx.Response(400, json={"message": f"unknown key {key}"})
        )
        client = tdk.http.install(httpx.Client(headers={"X-Api-Key": key.encode()}))
        with client, pytest.raises(UpstreamError) as caught:
            client.get("https://api.example.com/v1/x")
    assert caught.value.message.endswith('Upstream message: "unknown key [REDACTED]"')


def test_percent_encoded_secret_query_names_are_recognised() -> None:
    """``api%5Fkey=`` is ``api_key=``: its value is a credential, scrubbed from the echo."""
    url = "https://api.example.com/v1/x?api%5Fkey=q%2Fk-2468ace013579&page=1"
    with respx.mock(assert_all_called=True) as router:
        router.get(url).mock(
            return_value=httpx.Response(404, json={"message": "no key q/k-2468ace013579"})
        )
        with tdk.http.install(httpx.Client()) as client, pytest.raises(UpstreamError) as caught:
            client.get(url)
    assert caught.value.message.endswith('Upstream message: "no key [REDACTED]"')


# A value of each shape, none a well-known token shape: only the name says it is a credential.
VENDOR_KEY = "rk-7c1d9e2f4a6b8c0d1e"


@pytest.mark.parametrize(
    "header",
    [
        "X-RapidAPI-Key", "DD-API-KEY", "X-Algolia-API-Key", "apikey", "X-Auth-Key",
        "X-Vault-Token", "X-CSRF-Token", "Stripe-Signature", "X-Mashape-Key",
    ],
)  # fmt: skip
def test_echoed_vendor_key_headers_are_scrubbed(header: str) -> None:
    """An upstream that echoes a credential header it refused (in its words, and as a JSON key
    and a header line) leaves its value nowhere in the error."""

    def upstream(request: httpx.Request) -> httpx.Response:
        echo = f"invalid {request.headers[header]}; got {header}: {request.headers[header]}"
        body = {"message": echo, "code": "bad_key", "headers": {header: request.headers[header]}}
        return httpx.Response(400, json=body)

    client = httpx.Client(transport=httpx.MockTransport(upstream), headers={header: VENDOR_KEY})
    with tdk.http.install(client), pytest.raises(UpstreamError) as caught:
        client.get("https://api.example.com/v1/x")
    error = caught.value
    assert VENDOR_KEY not in json.dumps(error.to_dict())
    assert not {where for where, text in renderings(error).items() if VENDOR_KEY in text}
    assert error.message.startswith("The upstream service rejected the request (HTTP 400). ")
    assert "invalid [REDACTED]" in error.message


def test_short_values_of_inferred_credential_headers_are_not_scrubbed() -> None:
    """A short value of a header only the name rule marks (``X-Session-Affinity: true``) is
    not scrubbed from the upstream's words; a long one is."""

    def upstream(request: httpx.Request) -> httpx.Response:
        return httpx.Response(404, json={"message": "true: no item sess-0a1b2c3d4e here"})

    headers = {"X-Session-Affinity": "true", "X-Session-Id": "sess-0a1b2c3d4e"}
    client = httpx.Client(transport=httpx.MockTransport(upstream), headers=headers)
    with tdk.http.install(client), pytest.raises(UpstreamError) as caught:
        client.get("https://api.example.com/v1/x")
    assert caught.value.message.endswith('Upstream message: "true: no item [REDACTED] here"')


def test_a_context_secret_in_an_ordinary_parameter_is_kept_out_of_the_url() -> None:
    """URLs keep ordinary values (``city=Oslo``), but never a secret of the call, whatever the
    name of the parameter that carries it."""
    secret = "ctx-0a1b2c3d4e5f6789"

    @tool
    def weather(context: ToolContext) -> str:
        """Ask for the weather, sending the secret under an ordinary name."""
        missing = httpx.MockTransport(lambda request: httpx.Response(404))
        with tdk.http.install(httpx.Client(transport=missing)) as client:
            client.get(
                f"https://api.example.com/v1/weather?q={context.get_secret('KEY')}&city=Oslo"
            )
        return "sunny"

    result = asyncio.run(weather.run({}, context=ToolContext(secrets={"KEY": secret})))
    assert result.error is not None
    assert secret not in json.dumps(result.to_dict())
    assert (
        result.error.details["url"] == "https://api.example.com/v1/weather?q=[REDACTED]&city=Oslo"
    )
