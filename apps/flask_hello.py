"""Flask's hello world: the framework row of the experiments (same 13-byte body
as apps/hello.py, so only the framework's cost differs)."""
from flask import Flask, Response

app = Flask(__name__)
application = app


@app.route("/")
def hello():
    return Response(b"Hello, World!", mimetype="text/plain")
