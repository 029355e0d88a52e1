import { layers } from "./lib/parse.mjs";
if (layers('<div data-layer="a">').length !== 1) throw new Error("layers");
