// Lets @modelcontextprotocol/conformance (0.1.14 to 0.1.16) start on Node.js 20: its dist/
// imports `globSync` from "fs" at load, which only Node 22+ has (it is used only by its
// `tier-check` command, which tools/scripts/mcp-conformance never runs). Loaded with
// `node --import`, this registers itself as a resolve hook that hands the package's dist/ an
// "fs" that re-exports node:fs plus a `globSync` that throws. On a Node with globSync it does
// nothing.
import fs from "node:fs";
import { register } from "node:module";
import { isMainThread } from "node:worker_threads";

const SHIM =
  "data:text/javascript," +
  encodeURIComponent(
    'export * from "node:fs"; import fs from "node:fs"; export default fs;' +
      ' export function globSync() { throw new Error("fs.globSync needs Node.js 22+"); }',
  );

if (isMainThread && typeof fs.globSync !== "function") {
  register(import.meta.url);
}

export async function resolve(specifier, context, next) {
  const parent = context.parentURL ?? "";
  if ((specifier === "fs" || specifier === "node:fs") && parent.includes("/conformance/dist/")) {
    return { url: SHIM, shortCircuit: true };
  }
  return next(specifier, context);
}
