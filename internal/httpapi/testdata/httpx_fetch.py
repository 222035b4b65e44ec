"""Fetch a file as the platform's workspace runtime does.

httpx, never following redirects, taking any status below 400 as the
file: the body is written to OUT as it arrives. Prints one JSON line:
the status, the bytes written, their SHA-256 and the headers.

usage: httpx_fetch.py URL TOKEN OUT
"""
import hashlib
import json
import sys

import httpx

url, token, out = sys.argv[1:4]
h = hashlib.sha256()
n = 0
with httpx.Client(follow_redirects=False, timeout=120) as client:
    with client.stream("GET", url, headers={"Authorization": "Bearer " + token}) as r:
        if r.status_code < 400:
            with open(out, "wb") as f:
                for chunk in r.iter_raw():
                    f.write(chunk)
                    h.update(chunk)
                    n += len(chunk)
        print(json.dumps({
            "status": r.status_code,
            "written": n,
            "sha256": h.hexdigest(),
            "headers": {k.lower(): v for k, v in r.headers.items()},
        }))
