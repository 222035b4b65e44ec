// Drives examples/upload.html in headless Chromium (the system's, never a
// downloaded one) through playwright-core as a person would: picks files
// (made here, in memory), presses Upload, waits for the list, presses
// Download on each row and hashes what the browser saved, presses Ack on
// each, and prints one JSON line: {status, listed, sent, downloads,
// left}. Its one argument is a JSON object {chromium, url, files:[{name,
// size, type, seed}]}. Used by cmd/devserver's TestExamplePage.
import { createHash } from "node:crypto";
import { chromium } from "playwright-core";

const cfg = JSON.parse(process.argv[2]);
const WAIT_MS = 60_000;

// bytes is size bytes of a linear congruential sequence from seed.
function bytes(size, seed) {
  const b = Buffer.alloc(size);
  let x = seed >>> 0;
  for (let i = 0; i < size; i++) {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    b[i] = x >>> 24;
  }
  return b;
}

const sha256 = (b) => createHash("sha256").update(b).digest("hex");

const browser = await chromium.launch({
  executablePath: cfg.chromium,
  headless: true,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  timeout: 30_000,
});
process.on("SIGTERM", () => browser.close().finally(() => process.exit(143)));
try {
  const ctx = await browser.newContext({ acceptDownloads: true });
  const page = await ctx.newPage();
  page.setDefaultTimeout(WAIT_MS);
  page.on("console", (m) => process.stderr.write(`console.${m.type()}: ${m.text()}\n`));
  page.on("pageerror", (e) => process.stderr.write(`page error: ${e.message}\n`));
  await page.goto(cfg.url);
  await page.waitForSelector("#list[data-count]", { state: "attached" });

  const files = cfg.files.map((f) => ({ name: f.name, mimeType: f.type, buffer: bytes(f.size, f.seed) }));
  const sent = files.map((f) => ({ name: f.name, size: f.buffer.length, sha256: sha256(f.buffer) }));
  await page.setInputFiles("#files", files);
  await page.click("#upload");
  await page.waitForFunction(() => /^(Uploaded|Upload failed)/.test(document.getElementById("status").textContent));
  const status = await page.textContent("#status");
  await page.waitForFunction((n) => document.querySelectorAll("#list tr").length >= n, files.length);
  const listed = await page.$$eval("#list tr", (rows) => rows.map((r) => r.cells[0].textContent));

  const downloads = [];
  for (const row of await page.$$("#list tr")) {
    const [dl] = await Promise.all([page.waitForEvent("download"), row.$("button.download").then((b) => b.click())]);
    const chunks = [];
    for await (const c of await dl.createReadStream()) chunks.push(c);
    const b = Buffer.concat(chunks);
    downloads.push({ name: dl.suggestedFilename(), size: b.length, sha256: sha256(b) });
  }
  for (let n = files.length; n > 0; n--) {
    await page.click("#list tr:first-child button.ack");
    await page.waitForFunction((left) => document.getElementById("list").dataset.count === String(left), n - 1);
  }
  const left = Number(await page.getAttribute("#list", "data-count"));
  process.stdout.write(JSON.stringify({ status, listed, sent, downloads, left }) + "\n");
} finally {
  await browser.close();
}
