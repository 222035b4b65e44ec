// Drives headless Chromium (the system's) through playwright-core for the
// downloads the browser itself makes: the page calls
// window.harness[fn](args) for each step, and Chromium's own download
// manager saves what a navigation downloads into cfg.dir, watched
// through the DevTools protocol (Browser.setDownloadBehavior with
// events, Browser.downloadWillBegin and Browser.downloadProgress), the
// page's JS heap sampled meanwhile (Performance.getMetrics) and the
// renderer processes' resident memory (SystemInfo.getProcessInfo, then
// /proc). Its one argument is a JSON object {chromium, page, dir,
// cookies, steps:[{name, fn, args, download, timeoutMs}]}; it prints
// {stepName: {result, download, heap, rss, ms}} as one JSON line. A step
// with download waits for the download it starts to complete (or for
// timeoutMs), whatever interruptions and resumptions come between.
import { readFileSync } from "node:fs";
import { chromium } from "playwright-core";

const cfg = JSON.parse(process.argv[2]);
let browser;
process.on("SIGTERM", () => (browser ? browser.close() : Promise.resolve()).finally(() => process.exit(143)));

function rssOf(pid) {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, "utf8"));
    return m ? Number(m[1]) * 1024 : 0;
  } catch {
    return 0;
  }
}

try {
  browser = await chromium.launch({
    executablePath: cfg.chromium,
    headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-quic"],
    timeout: 30_000,
  });
  const ctx = await browser.newContext({ acceptDownloads: true });
  if (cfg.cookies) await ctx.addCookies(cfg.cookies.map((c) => ({ ...c, sameSite: "Lax" })));
  const page = await ctx.newPage();
  page.setDefaultTimeout(60_000);
  page.on("console", (m) => process.stderr.write(`console.${m.type()}: ${m.text()}\n`));
  page.on("pageerror", (e) => process.stderr.write(`page error: ${e.message}\n`));
  await page.goto(cfg.page);
  await page.waitForFunction(() => window.harness !== undefined);

  const bcdp = await browser.newBrowserCDPSession();
  const { targetInfos } = await bcdp.send("Target.getTargets");
  const target = targetInfos.find((t) => t.type === "page" && t.url === page.url());
  await bcdp.send("Browser.setDownloadBehavior", {
    behavior: "allowAndName",
    browserContextId: target.browserContextId,
    downloadPath: cfg.dir,
    eventsEnabled: true,
  });
  const downloads = [];
  bcdp.on("Browser.downloadWillBegin", (e) => downloads.push({ guid: e.guid, url: e.url, name: e.suggestedFilename, states: [], received: 0, total: 0 }));
  bcdp.on("Browser.downloadProgress", (e) => {
    const d = downloads.find((x) => x.guid === e.guid);
    if (!d) return;
    d.received = e.receivedBytes;
    d.total = e.totalBytes;
    if (d.states[d.states.length - 1] !== e.state) d.states.push(e.state);
    d.state = e.state;
  });
  const pcdp = await ctx.newCDPSession(page);
  await pcdp.send("Performance.enable");
  const jsHeap = async () => (await pcdp.send("Performance.getMetrics")).metrics.find((m) => m.name === "JSHeapUsedSize").value;
  const renderersRSS = async () => {
    const { processInfo } = await bcdp.send("SystemInfo.getProcessInfo");
    return processInfo.filter((p) => p.type === "renderer").reduce((n, p) => n + rssOf(p.id), 0);
  };

  const results = {};
  for (const step of cfg.steps) {
    await pcdp.send("HeapProfiler.collectGarbage");
    const heap = { before: await jsHeap(), max: 0, after: 0 };
    const rss = { before: await renderersRSS(), max: 0, after: 0 };
    heap.max = heap.before;
    rss.max = rss.before;
    const seen = downloads.length;
    const start = Date.now();
    const result = await page.evaluate(([fn, args]) => window.harness[fn](args), [step.fn, step.args]);
    let download = null;
    const deadline = start + (step.timeoutMs || 60_000);
    for (;;) {
      heap.max = Math.max(heap.max, await jsHeap());
      rss.max = Math.max(rss.max, await renderersRSS());
      download = downloads[seen] || null;
      if (!step.download || (download && download.state === "completed") || Date.now() > deadline) break;
      await new Promise((r) => setTimeout(r, 250));
    }
    heap.after = await jsHeap();
    rss.after = await renderersRSS();
    results[step.name] = { result, download, heap, rss, ms: Date.now() - start };
  }
  results.userAgent = await page.evaluate(() => navigator.userAgent);
  process.stdout.write(JSON.stringify(results) + "\n");
} finally {
  if (browser) await browser.close();
}
