"""genq's /v1 routes with nothing but Python's standard library."""
import json
import os
import urllib.error
import urllib.request

base = os.environ["GENQ_OPENAI_URL"]
key = os.environ["GENQ_API_KEY"]


def post(path, body, key=key):
    req = urllib.request.Request(base + path, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json", "Authorization": f"Bearer {key}"})
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.status, json.load(resp)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)


status, chat = post("/chat/completions", {"model": "genq", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3})
assert status == 200 and chat["object"] == "chat.completion", (status, chat)
assert chat["choices"][0]["message"]["role"] == "assistant" and chat["usage"]["completion_tokens"] <= 3, chat
status, comp = post("/completions", {"model": "genq", "prompt": "abc", "max_tokens": 2})
assert status == 200 and comp["object"] == "text_completion", (status, comp)
status, comp = post("/completions", {"model": "genq", "prompt": "abc", "n": 3, "max_tokens": 2})
assert status == 200 and [c["index"] for c in comp["choices"]] == [0, 1, 2], (status, comp)
status, err = post("/completions", {"model": "genq", "prompt": "abc", "n": 9})
assert status == 400 and err["error"]["type"] == "invalid_request_error", (status, err)
status, chat = post("/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "response_format": {"type": "json_object"}})
choice = chat["choices"][0]
assert status == 200 and choice["message"]["content"].startswith("{"), (status, chat)
if choice["finish_reason"] == "stop":
    assert isinstance(json.loads(choice["message"]["content"]), dict), chat
status, err = post("/chat/completions", {"messages": [{"role": "user", "content": "hi"}],
                                         "response_format": {"type": "json_schema", "json_schema": {"name": "n", "schema": {"type": "array", "uniqueItems": True}}}})
assert status == 400 and 'the schema keyword "uniqueItems"' in err["error"]["message"], (status, err)
status, comp = post("/completions", {"prompt": "x", "max_tokens": 8, "temperature": 0, "logit_bias": {"65": 100}})
assert status == 200 and comp["choices"][0]["text"] == "A" * 8, (status, comp)  # byte-level vocabulary: 65 is "A"
status, chat = post("/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3, "logprobs": True, "top_logprobs": 1})
entries = chat["choices"][0]["logprobs"]["content"]
assert status == 200 and entries and all(e["logprob"] <= 0 and len(e["top_logprobs"]) == 1 for e in entries), (status, chat)
status, err = post("/completions", {"prompt": "abc"}, key="wrong")
assert status == 401 and err["error"]["type"] == "authentication_error", (status, err)
print("urllib smoke test: ok")
