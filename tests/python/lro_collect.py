"""Collects a StartToolCall operation with a real long-running-operations client: Google's
`google-api-core` polling helper (`operation.from_gapic(...).result()`), as a Python agent
would, from a process other than the one that started it.

usage: lro_collect.py ADDRESS TOKEN OPERATION_NAME DESCRIPTOR_SET

DESCRIPTOR_SET is the broker's FileDescriptorSet (toolbroker.v1 and what it imports): the
response and metadata classes are built from it, so no generated stubs are needed. Prints one
JSON line: the result's text, whether the tool reported an error, the last metadata's state
and progress, or the error the operation ended with.
"""

import json
import sys

import grpc
from google.api_core import exceptions, operation, operations_v1
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory


def broker_messages(path: str):
    """CallToolResponse and ToolCallMetadata, from the broker's descriptor set."""
    files = descriptor_pb2.FileDescriptorSet.FromString(open(path, "rb").read())
    pool = descriptor_pool.DescriptorPool()
    for file in files.file:
        pool.Add(file)
    response = pool.FindMessageTypeByName("toolbroker.v1.CallToolResponse")
    metadata = pool.FindMessageTypeByName("toolbroker.v1.ToolCallMetadata")
    return message_factory.GetMessageClass(response), message_factory.GetMessageClass(metadata)


def main() -> None:
    address, token, name, descriptors = sys.argv[1:5]
    response_type, metadata_type = broker_messages(descriptors)
    auth = [("authorization", f"Bearer {token}")]
    with grpc.insecure_channel(address) as channel:
        client = operations_v1.OperationsClient(channel)
        started = client.get_operation(name, metadata=auth)
        future = operation.from_gapic(
            started, client, response_type, metadata_type=metadata_type, grpc_metadata=auth
        )
        try:
            result = future.result(timeout=60)
            outcome = {
                "text": "".join(block.text.text for block in result.content),
                "is_error": result.is_error,
            }
        except exceptions.GoogleAPICallError as error:
            outcome = {"error": type(error).__name__, "message": error.message}
        last = future.metadata
        outcome["state"] = metadata_type.DESCRIPTOR.fields_by_name["state"].enum_type.values_by_number[
            last.state
        ].name
        outcome["progress"] = last.progress.progress
        outcome["tool"] = last.tool
        print(json.dumps(outcome), flush=True)


if __name__ == "__main__":
    main()
