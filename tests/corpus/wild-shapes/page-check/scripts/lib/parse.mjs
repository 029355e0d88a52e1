// Layers of an HTML page.
export function layers(html) {
  return [...html.matchAll(/data-layer="([^"]+)"/g)].map((m) => m[1]);
}
