// Check that every layer of a page has a depth and a z-index.
import { readFileSync } from "node:fs";
import { layers } from "./lib/parse.mjs";

const file = process.argv[2];
for (const l of layers(readFileSync(file, "utf8"))) {
  console.log(l);
}
