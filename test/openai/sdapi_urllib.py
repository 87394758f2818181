"""genq's /sdapi/v1 (AUTOMATIC1111's API) as Open WebUI's image router calls
it, with nothing but Python's standard library: the URL check, the model
list, the model set back, txt2img with the admin's settings, and a 400 that
names a bad field."""
import base64
import json
import os
import urllib.error
import urllib.request

base = os.environ["GENQ_OPENAI_IMAGE_URL"].removesuffix("/v1")
# Open WebUI's AUTOMATIC1111_API_AUTH is "user:password", sent as Basic.
auth = "Basic " + base64.b64encode(("webui:" + os.environ["GENQ_API_KEY"]).encode()).decode()


def call(method, path, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base + path, data=data, method=method,
                                 headers={"Content-Type": "application/json", "authorization": auth})
    try:
        with urllib.request.urlopen(req, timeout=120) as resp:
            return resp.status, json.load(resp)
    except urllib.error.HTTPError as e:
        return e.code, json.load(e)


status, options = call("GET", "/sdapi/v1/options")
assert status == 200 and options["sd_model_checkpoint"], (status, options)
model = options["sd_model_checkpoint"]
status, models = call("GET", "/sdapi/v1/sd-models")
assert status == 200 and [m["title"] for m in models] == [model], (status, models)
status, _ = call("POST", "/sdapi/v1/options", options)
assert status == 200, status

status, res = call("POST", "/sdapi/v1/txt2img", {"prompt": "a lighthouse at dusk", "batch_size": 2, "width": 64,
                                                 "height": 64, "steps": 2, "cfg_scale": 7, "sampler_name": "Euler"})
assert status == 200 and len(res["images"]) == 2, (status, str(res)[:300])
for b64 in res["images"]:
    png = base64.b64decode(b64)
    assert png[:8] == b"\x89PNG\r\n\x1a\n", png[:8]
    assert int.from_bytes(png[16:20], "big") == 64 and int.from_bytes(png[20:24], "big") == 64, png[16:24]
info = json.loads(res["info"])
assert len(info["all_seeds"]) == 2 and info["all_seeds"][1] == info["all_seeds"][0] + 1, info

status, err = call("POST", "/sdapi/v1/txt2img", {"prompt": "x", "sampler_name": "DPM++ 2M Karras"})
assert status == 400 and "sampler_name" in err["detail"], (status, err)
print("sdapi urllib test: ok")
