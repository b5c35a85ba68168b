#!/usr/bin/env node
// A Node.js agent of toolbroker: list the tools, hand them to an LLM API, call one, watch changes.
//
// Run it (from the repository root, Node 20+, with a broker running, e.g. `cargo run --release`):
//
//   npm ci --prefix examples/node-agent
//   node examples/node-agent/agent.js [ADDR] [--watch-seconds N] [--demo-change]
//
// ADDR defaults to $TOOLBROKER_ADDR, else 127.0.0.1:50051. If $TOOLBROKER_TOKEN is set it is sent
// as `authorization: Bearer <token>`. The .proto is loaded at run time: no generated code.
// --demo-change calls the demo server's `add_tool` once Watch has started, so a ToolsChanged
// event follows.
'use strict';

const path = require('node:path');
const { parseArgs } = require('node:util');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');

const { values: opts, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    'watch-seconds': { type: 'string', default: '3' },
    'demo-change': { type: 'boolean', default: false },
  },
});
const addr = positionals[0] || process.env.TOOLBROKER_ADDR || '127.0.0.1:50051';

const definition = protoLoader.loadSync(
  path.join(__dirname, '..', '..', 'proto', 'toolbroker', 'v1', 'broker.proto'),
  { keepCase: true, enums: String, longs: String, defaults: true, oneofs: true },
);
const { ToolBroker } = grpc.loadPackageDefinition(definition).toolbroker.v1;
const broker = new ToolBroker(addr, grpc.credentials.createInsecure());

const metadata = new grpc.Metadata();
if (process.env.TOOLBROKER_TOKEN) {
  metadata.set('authorization', `Bearer ${process.env.TOOLBROKER_TOKEN}`);
}
const deadline = (seconds) => ({ deadline: Date.now() + seconds * 1000 });
// Unary calls as promises.
const call = (method, request) => new Promise((resolve, reject) => {
  broker[method](request, metadata, deadline(30), (err, res) => (err ? reject(err) : resolve(res)));
});
const names = (tools) => JSON.stringify(tools.map((t) => t.name ?? t));

async function main() {
  // 1. The tools, as function-calling JSON for two LLM APIs: the raw JSON Schema is the
  //    parameters / input_schema as it is.
  const { tools } = await call('ListTools', {});
  const openai = tools.map((t) => ({
    type: 'function',
    function: { name: t.name, description: t.description, parameters: JSON.parse(t.input_schema_json) },
  }));
  const anthropic = tools.map((t) => ({
    name: t.name, description: t.description, input_schema: JSON.parse(t.input_schema_json),
  }));
  console.log('## OpenAI tools');
  console.log(JSON.stringify(openai, null, 2));
  console.log('## Anthropic tools');
  console.log(JSON.stringify(anthropic, null, 2));

  // 2. A call, as the agent would make when the model asks for it.
  const result = await call('CallTool', {
    name: 'echo', arguments_json: JSON.stringify({ message: 'hello from node' }),
  });
  console.log(`## echo result${result.is_error ? ' (tool error)' : ''}`);
  console.log(result.text);

  // 3. Watch: a snapshot first, then one line per change, for --watch-seconds.
  console.log('## Watch');
  const stream = broker.Watch({}, metadata, deadline(Number(opts['watch-seconds'])));
  stream.on('data', (event) => {
    const at = `revision ${event.revision}`;
    if (event.event === 'snapshot') {
      const servers = event.snapshot.servers.map((s) => `${s.name}=${s.state}`).join(', ');
      console.log(`${at}: snapshot: ${event.snapshot.tools.length} tools; servers: ${servers}`);
      if (opts['demo-change']) {
        call('CallTool', { name: 'add_tool', arguments_json: JSON.stringify({ name: 'added_by_node' }) })
          .catch((err) => { console.error(`add_tool failed: ${err.message}`); process.exitCode = 1; });
      }
    } else if (event.event === 'tools_changed') {
      const c = event.tools_changed;
      console.log(`${at}: tools_changed: server ${c.server}: added ${names(c.added)},`
        + ` updated ${names(c.updated)}, removed ${names(c.removed)}`);
    } else if (event.event === 'server_status') {
      const s = event.server_status;
      console.log(`${at}: server_status: ${s.name} ${s.state} ${s.message}`);
    }
  });
  await new Promise((resolve, reject) => {
    stream.on('error', (err) => (err.code === grpc.status.DEADLINE_EXCEEDED ? resolve() : reject(err)));
    stream.on('end', resolve);
  });
  console.log('## done');
  broker.close();
}

main().catch((err) => {
  console.error(`error: ${err.message}`);
  process.exit(1);
});
