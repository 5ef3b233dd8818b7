// Build a prompt, compute its routing key locally, and (with PREFIXGATE_URL
// set) send it through a router.
//
//   npm run build && node dist/examples/quickstart.js
import { ConnectError, PrefixgateClient, type PromptSpec, buildKey } from "@prefixgate/client";

const spec: PromptSpec = {
  model: "vllmsim/tiny",
  instructions: "Answer from the document.",
  documents: [{ id: "q3", title: "Quarterly report", text: "Revenue grew 12% to $4.1M." }],
  question: "What grew?",
  parameters: { max_tokens: 16 },
  metadata: { request_id: "example-1" }, // volatile: never changes the key
};

const { body, route } = buildKey(spec);
console.log(new TextDecoder().decode(body));
console.log("key", route.keyHex);

const url = process.env["PREFIXGATE_URL"];
if (url) {
  const client = new PrefixgateClient(url);
  try {
    const res = await client.chat(spec);
    console.log(res.content);
    console.log("served by", res.routing?.backend, "key", res.routing?.key);
  } catch (e) {
    const ce = ConnectError.from(e);
    console.error(`router said ${ce.code}: ${ce.rawMessage}`);
    process.exitCode = 1;
  }
}
