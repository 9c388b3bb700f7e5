"""TF Serving's two predict APIs in front of an exported model, for tests.

The real model server cannot run on the test machines: it ships as a Docker
image or a Debian package from Google's own repository, and these machines
have no Docker engine and reach only PyPI and Debian. This stands in for it
so that the documented client commands (curl and the gRPC snippet), unmodified,
run against our export:

- the model is loaded as the server loads it: the newest numeric version
  under the base path, through the TF1 SavedModel loader with the "serve" tag,
  in a Session of its own (no Python objects of the export are used);
- REST: `POST /v1/models/<name>[/versions/<v>]:predict` with the row format
  (`{"signature_name": ..., "instances": [...]}` -> `{"predictions": [...]}`;
  with several outputs, each prediction is an object keyed by output name);
- gRPC: `tensorflow.serving.PredictionService/Predict`, from
  tensorflow-serving-api's own service definition.

What it does not check is TF Serving's own C++ loader; tests/export/test_saved_model.py
covers the same loader path in Python, and the saved_model_cli listing.
"""

import concurrent.futures
import http.server
import json
import os
import re
import threading

import grpc
import numpy as np
import tensorflow as tf
from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc


class SessionModel:
    """The newest version under `base_path`, loaded with the TF1 loader."""

    def __init__(self, base_path):
        versions = [int(v) for v in os.listdir(base_path) if v.isdigit()]
        if not versions:
            raise FileNotFoundError(f"No numeric version folders in {base_path!r}.")
        self.version = max(versions)
        self._graph = tf.Graph()
        self._session = tf.compat.v1.Session(graph=self._graph)
        with self._graph.as_default():
            meta_graph = tf.compat.v1.saved_model.loader.load(
                self._session, ["serve"], os.path.join(base_path, str(self.version)))
        self.signatures = dict(meta_graph.signature_def)

    def run(self, signature_name, inputs):
        """{output name: numpy array} for {input name: numpy array}."""
        signature = self.signatures[signature_name or "serving_default"]
        unknown = set(inputs) - set(signature.inputs)
        if unknown:
            raise KeyError(f"signature {signature_name!r} has no inputs {sorted(unknown)}")
        feeds = {signature.inputs[k].name: v for k, v in inputs.items()}
        fetches = {k: v.name for k, v in signature.outputs.items()}
        return self._session.run(fetches, feeds)

    def close(self):
        self._session.close()


def _json_value(value):
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, np.generic):
        return value.item()
    return value


def rest_predict(model, body):
    """The row-format REST predict: a JSON body in, a JSON-able answer out."""
    signature_name = body.get("signature_name", "serving_default")
    signature = model.signatures[signature_name]
    instances = body["instances"]
    if len(signature.inputs) == 1:
        (name,) = signature.inputs
        inputs = {name: np.array(instances, dtype=object)}
    else:
        inputs = {name: np.array([row[name] for row in instances], dtype=object) for name in signature.inputs}
    outputs = model.run(signature_name, inputs)
    rows = [{k: _json_value(v[i]) for k, v in outputs.items()} for i in range(len(instances))]
    if len(outputs) == 1:
        rows = [next(iter(row.values())) for row in rows]
    return {"predictions": rows}


class _PredictionService(prediction_service_pb2_grpc.PredictionServiceServicer):
    def __init__(self, name, model):
        self.name, self.model = name, model

    def Predict(self, request, context):  # noqa: N802  (the gRPC method name)
        if request.model_spec.name != self.name:
            context.abort(grpc.StatusCode.NOT_FOUND, f"Servable not found for request: {request.model_spec.name}")
        inputs = {k: tf.make_ndarray(v) for k, v in request.inputs.items()}
        outputs = self.model.run(request.model_spec.signature_name, inputs)
        response = predict_pb2.PredictResponse()
        response.model_spec.name = self.name
        response.model_spec.version.value = self.model.version
        response.model_spec.signature_name = request.model_spec.signature_name or "serving_default"
        for key, value in outputs.items():
            response.outputs[key].CopyFrom(tf.make_tensor_proto(value))
        return response


class ServingDouble:
    """Serves `base_path` as model `name` on 127.0.0.1: REST on `rest_port`,
    gRPC on `grpc_port` (0 picks free ports). Use as a context manager."""

    def __init__(self, name, base_path, rest_port=0, grpc_port=0):
        self.name, self.model = name, SessionModel(base_path)
        self._grpc = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=2))
        prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(
            _PredictionService(name, self.model), self._grpc)
        self.grpc_port = self._grpc.add_insecure_port(f"127.0.0.1:{grpc_port}")
        self._http = http.server.ThreadingHTTPServer(("127.0.0.1", rest_port), self._rest_handler())
        self.rest_port = self._http.server_address[1]

    def _rest_handler(self):
        name, model = self.name, self.model
        path = re.compile(rf"^/v1/models/{re.escape(name)}(/versions/\d+)?:predict$")

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802  (http.server's method name)
                if not path.match(self.path):
                    return self._reply(404, {"error": f"Servable not found for request: {self.path}"})
                try:
                    body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                    return self._reply(200, rest_predict(model, body))
                except (KeyError, ValueError, TypeError) as error:
                    return self._reply(400, {"error": str(error)})

            def _reply(self, status, payload):
                data = json.dumps(payload).encode("utf-8")
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        return Handler

    def __enter__(self):
        self._grpc.start()
        threading.Thread(target=self._http.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc):
        self._http.shutdown()
        self._http.server_close()
        self._grpc.stop(grace=None)
        self.model.close()
