#!/usr/bin/env node
// A Node.js agent of toolbroker: list the tools, hand them to an LLM API, call one, watch changes.
//
// Run it (from the repository root, Node 20+, with a broker running, e.g. `cargo run --release`):
//
//   npm ci --prefix examples/node-agent
//   node examples/node-agent/agent.js [ADDR] [--watch-seconds N] [--demo-change] [--answer TEXT]
//
// ADDR defaults to $TOOLBROKER_ADDR, else 127.0.0.1:50051. If $TOOLBROKER_TOKEN is set it is sent
// as `authorization: Bearer <token>`. The .proto is loaded at run time: no generated code.
// --demo-change calls the demo server's `add_tool` once Watch has started, so a ToolsChanged
// event follows. The `## stream` section calls the demo's `sleep` and `ask` over CallToolStream:
// it prints the progress the server reports, and answers the question `ask` puts to the user
// with --answer (default "blue"), as an agent would pass on its user's answer. The
// `## resources` section lists the resources, reads demo://readme and fills in the `summarize`
// prompt.
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
    answer: { type: 'string', default: 'blue' },
  },
});
const addr = positionals[0] || process.env.TOOLBROKER_ADDR || '127.0.0.1:50051';

const definition = protoLoader.loadSync(
  path.join(__dirname, '..', '..', 'proto', 'toolbroker', 'v1', 'broker.proto'),
  {
    keepCase: true, enums: String, longs: String, defaults: true, oneofs: true,
    // Where the google/longrunning and google/api files it imports are (vendored beside it).
    includeDirs: [path.join(__dirname, '..', '..', 'proto')],
  },
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

// A JSON value as a google.protobuf.Value: proto-loader passes well-known types on as their
// messages, so a Struct is `{ fields: { name: Value } }`. Their field names stay camelCase
// (`stringValue`), keepCase or not: proto-loader brings its own copy of struct.proto.
const toValue = (v) => {
  if (v === null || v === undefined) return { nullValue: 'NULL_VALUE' };
  if (Array.isArray(v)) return { listValue: { values: v.map(toValue) } };
  switch (typeof v) {
    case 'string': return { stringValue: v };
    case 'number': return { numberValue: v };
    case 'boolean': return { boolValue: v };
    default: return { structValue: toStruct(v) };
  }
};
const toStruct = (object) => ({
  fields: Object.fromEntries(Object.entries(object).map(([k, v]) => [k, toValue(v)])),
});

// CallToolStream: runs the call `request` and resolves to its CallToolResponse, showing what
// happens meanwhile. Each progress event goes to `onProgress(progress)`; an elicitation (the MCP
// server asks the user for input) to `onElicitation(elicitation)`, which returns the
// `{ action, content }` to answer with; a sampling request (the server asks for a completion of
// the agent's model) is refused, as this agent has no model to hand it to. An unknown tool or a
// refused call rejects with the gRPC error, as CallTool does.
//
// The call is a duplex stream: write the call first, then an answer whenever an event asks for
// one. Ending our side (half-close) makes the broker decline later elicitations, so it is ended
// only once the result is in.
function callToolStream(request, { onProgress, onElicitation }) {
  return new Promise((resolve, reject) => {
    const stream = broker.CallToolStream(metadata, deadline(60));
    let result;
    stream.on('data', (event) => {
      if (event.event === 'progress') {
        onProgress(event.progress);
      } else if (event.event === 'elicitation') {
        const { id } = event.elicitation;
        const { action, content } = onElicitation(event.elicitation);
        const answer = { id, action, content: content && toStruct(content) };
        stream.write({ elicitation_response: answer });
      } else if (event.event === 'sampling') {
        const error = 'this agent has no model to sample from';
        stream.write({ sampling_response: { id: event.sampling.id, error } });
      } else if (event.event === 'result') {
        result = event.result; // the last message: the broker ends the stream with OK
        stream.end();
      }
    });
    stream.on('error', reject);
    stream.on('end', () => (result ? resolve(result)
      : reject(new Error('CallToolStream ended without a result'))));
    stream.write({ call: request }); // the call is the first message
  });
}

// What an agent does with an elicitation: shows the server's question to its user and sends back
// what they fill in, or declines. The user here is --answer: it fills in the form's string fields
// (the demo's `ask` has one, `answer`); a form wanting anything else, or a URL to open (url
// mode), is declined, as this agent cannot show either.
function askUser(elicitation) {
  console.log(`question: ${elicitation.message}`);
  if (elicitation.mode !== 'form') return { action: 'decline' };
  const fields = JSON.parse(elicitation.requested_schema_json || '{}').properties ?? {};
  if (Object.values(fields).some((field) => field.type !== 'string')) return { action: 'decline' };
  const content = Object.fromEntries(Object.keys(fields).map((name) => [name, opts.answer]));
  return { action: 'accept', content };
}

// One line per progress event: `progress 1/3: slept 200 of 600 ms`.
const printProgress = (p) => {
  console.log(`progress ${p.progress}${p.total != null ? `/${p.total}` : ''}: ${p.message}`);
};

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

  // 2c. Calls over CallToolStream: `sleep` reports its progress as it goes, and `ask` asks the
  //     user a question mid-call, which the agent answers on the same stream.
  console.log('## stream');
  const slept = await callToolStream(
    { name: 'sleep', arguments_json: JSON.stringify({ ms: 600, steps: 3 }) },
    { onProgress: printProgress, onElicitation: () => ({ action: 'decline' }) },
  );
  console.log(`sleep result${slept.is_error ? ' (tool error)' : ''}: ${slept.text}`);
  const question = 'What colour should the logo be?';
  const asked = await callToolStream(
    { name: 'ask', arguments_json: JSON.stringify({ question }) },
    { onProgress: printProgress, onElicitation: askUser },
  );
  console.log(`ask result${asked.is_error ? ' (tool error)' : ''}: ${asked.text}`);

  // 2d. Resources and prompts: what the servers offer besides tools, for the agent to put in
  //     the model's context.
  console.log('## resources');
  const listed = await call('ListResources', {});
  for (const r of listed.resources) console.log(`resource ${r.server} ${r.uri}`);
  for (const t of listed.templates) console.log(`template ${t.server} ${t.uri_template}`);
  const read = await call('ReadResource', { server: 'demo', uri: 'demo://readme' });
  for (const c of read.contents) {
    console.log(`read ${c.uri}: ${c.contents === 'text' ? c.text : `(${c.blob.length} bytes)`}`);
  }
  const prompt = await call('GetPrompt', { name: 'summarize', arguments: { topic: 'toolbroker' } });
  for (const m of prompt.messages) {
    const text = m.content.kind === 'text' ? m.content.text.text : `<${m.content.kind} content>`;
    console.log(`prompt summarize (${m.role}): ${text}`);
  }

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
