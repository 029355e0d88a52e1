"""What the test scripts share to reach band-sandboxd's gRPC port: the pod's token on every call,
as the SDK's gRPC channel would carry it behind a gateway that adds it."""

import grpc

from k8s_agent_sandbox.commands._process_stubs import process_pb2_grpc as pbg


class Auth(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor):
    def __init__(self, token):
        self.token = token

    def _with(self, details):
        md = list(details.metadata or []) + [("authorization", f"Bearer {self.token}")]
        return details._replace(metadata=md)

    def intercept_unary_unary(self, cont, details, request):
        return cont(self._with(details), request)

    def intercept_unary_stream(self, cont, details, request):
        return cont(self._with(details), request)


def channel(target, token):
    """A channel to `target` that sends `token` with every call."""
    return grpc.intercept_channel(grpc.insecure_channel(target), Auth(token))


def stub(target, token):
    """The SDK's generated ProcessService stub over [`channel`]."""
    return pbg.ProcessServiceStub(channel(target, token))
