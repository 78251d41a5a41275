"""Generated gRPC/protobuf stubs (``make proto``); do not edit by hand."""
