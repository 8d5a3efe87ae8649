"""A real Flask app, served unmodified (test_flask.py)."""
import time

from flask import Flask, Response, jsonify, redirect, request, stream_with_context, url_for

app = Flask(__name__)


@app.route("/")
def index():
    return "flask index"


@app.route("/user/<name>")
def user(name):
    return jsonify(user=name, args=request.args.to_dict())


@app.route("/json", methods=["POST"])
def json_post():
    data = request.get_json()
    return jsonify(received=data, doubled=[x * 2 for x in data.get("numbers", [])]), 201


@app.route("/form", methods=["GET", "POST"])
def form():
    if request.method == "GET":
        return '<form method="post"><input name="name"><input name="color"></form>'
    return "name=%s color=%s" % (request.form["name"], request.form.get("color", "-"))


@app.route("/old")
def old():
    return redirect(url_for("index"))


@app.route("/stream")
def stream():
    n = int(request.args.get("n", "5"))

    def gen():
        for i in range(n):
            # request is only usable here thanks to stream_with_context
            yield "%s-%d;" % (request.args.get("tag", "t"), i)
            time.sleep(0.01)
    return Response(stream_with_context(gen()), mimetype="text/plain")


@app.route("/boom")
def boom():
    raise ValueError("flask-view-error")


application = app
