// The preview server: serves frame-template.html on 127.0.0.1.
const http = require("http");
const fs = require("fs");
const path = require("path");

function serve(port) {
  const page = fs.readFileSync(path.join(__dirname, "frame-template.html"));
  return http.createServer((_, res) => res.end(page)).listen(port, "127.0.0.1");
}

if (require.main === module) {
  const s = serve(0);
  s.on("listening", () => console.log(JSON.stringify({ port: s.address().port })));
}

module.exports = { serve };
