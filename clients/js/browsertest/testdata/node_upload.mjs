// The client in node, as a script or a platform service calls it
// (node_test.go runs it against the real service): files read from disk
// as they go (fs.openAsBlob), uploaded with progress, one small (multipart),
// one over the request cap (a presigned PUT), one over the multipart
// threshold (in parts); then each read back with downloadFile, a link
// from openFile (no document: it only returns the link) fetched bare,
// and acked. Its one line of output is JSON for the test to check.
import { openAsBlob } from "node:fs";
import { basename } from "node:path";

import { ack, downloadFile, openFile, uploadFiles } from "../../pendinguploads.js";

const { api, token, ws, paths } = JSON.parse(process.env.NODE_UPLOAD);
const files = await Promise.all(paths.map(async (p) => new File([await openAsBlob(p)], basename(p))));

let last = 0;
let backwards = false;
let total = 0;
let calls = 0;
const { files: staged } = await uploadFiles(api, token, ws, files, {
  onProgress: (p) => {
    calls++;
    if (p.loaded < last) backwards = true;
    last = p.loaded;
    total = p.total;
  },
});

const read = [];
for (const f of staged) {
  const d = await downloadFile(api, token, ws, f.file_id);
  const link = await openFile(api, token, ws, f.file_id);
  const viaLink = await fetch(link.url);
  const bytes = new Uint8Array(await viaLink.arrayBuffer());
  const digest = Buffer.from(await crypto.subtle.digest("SHA-256", bytes)).toString("hex");
  await ack(api, token, ws, f.file_id);
  read.push({ name: d.name, size: d.size, sha256: d.sha256, linkStatus: viaLink.status, linkSha256: digest });
}
console.log(JSON.stringify({ staged, progress: { last, total, calls, backwards }, read }));
