// In a browser: bundle this file (any bundler that honours the "browser"
// export condition, or import "@prefixgate/client/web" explicitly). The
// client speaks Connect or gRPC-Web over fetch. A page on another origin than
// the router needs `prefixgate serve --cors-origin <origin>`.
import { Code, ConnectError, PrefixgateClient, buildKey, type PromptSpec } from "@prefixgate/client/web";

const client = new PrefixgateClient(globalThis.location?.origin ?? "http://127.0.0.1:8080", { protocol: "grpc-web" });

export async function ask(question: string, out: { textContent: string | null }): Promise<void> {
  const spec: PromptSpec = {
    model: "vllmsim/tiny",
    instructions: "Answer from the handbook.",
    question,
    parameters: { max_tokens: 32 },
  };
  const { route } = buildKey(spec); // computed in the page, no server call
  out.textContent = "";
  try {
    for await (const chunk of client.chatStream(spec)) {
      if (chunk.routing) console.log("key", chunk.routing.key, "=", route.keyHex, "on", chunk.routing.backend);
      out.textContent += chunk.delta;
    }
  } catch (e) {
    const ce = ConnectError.from(e);
    out.textContent = ce.code === Code.Unavailable ? "no backend serves this model" : ce.rawMessage;
  }
}
