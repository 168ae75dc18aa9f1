// Parse Mermaid text from stdin with the real mermaid parser (jsdom stands in for the browser).
// Copied next to a node_modules holding mermaid and jsdom (SACK8S_MERMAID) by tests/test_graph.py.
import { JSDOM } from "jsdom";
import fs from "node:fs";

const dom = new JSDOM("<!DOCTYPE html><body></body>");
globalThis.window = dom.window;
globalThis.document = dom.window.document;
const { default: mermaid } = await import("mermaid");
try {
  const result = await mermaid.parse(fs.readFileSync(0, "utf8"));
  console.log(JSON.stringify(result));
} catch (e) {
  console.error(`mermaid: ${e.message ?? String(e)}`);
  process.exit(1);
}
