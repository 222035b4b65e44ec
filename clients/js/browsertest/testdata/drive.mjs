// Drives headless Chromium (the system's, never a downloaded one) through
// playwright-core: opens each step's page, calls window.harness[fn](args)
// and prints {stepName: result} as one JSON line on stdout. Its one
// argument is a JSON object {chromium, steps:[{name, page, fn, args,
// cookies, reload}]}: a step with cookies ([{name, value, url}]) runs with
// exactly those in the browser, as a signed-in user's would be; a step
// with reload ({name, fn, args}) reloads its page as soon as fn resolves
// (whatever the page still has in flight is cut, as a person's reload
// cuts it) and then calls reload.fn, its result under reload.name.
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium } from "playwright-core";

const cfg = JSON.parse(process.argv[2]);
const userDataDir = mkdtempSync(join(tmpdir(), "pendinguploads-chromium-"));
const STEP_TIMEOUT_MS = 60_000;

let ctx;
const stop = async () => {
  try {
    if (ctx) await ctx.close();
  } finally {
    rmSync(userDataDir, { recursive: true, force: true });
  }
};
process.on("SIGTERM", () => stop().finally(() => process.exit(143)));

try {
  ctx = await chromium.launchPersistentContext(userDataDir, {
    executablePath: cfg.chromium,
    headless: true,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
      "--disable-quic",
    ],
    timeout: 30_000,
  });
  const results = {};
  for (const step of cfg.steps) {
    if (step.cookies) {
      await ctx.clearCookies();
      await ctx.addCookies(step.cookies.map((c) => ({ ...c, sameSite: "Lax" })));
    }
    const page = await ctx.newPage();
    page.setDefaultTimeout(STEP_TIMEOUT_MS);
    page.on("console", (m) => process.stderr.write(`[${step.name}] console.${m.type()}: ${m.text()}\n`));
    page.on("pageerror", (e) => process.stderr.write(`[${step.name}] page error: ${e.message}\n`));
    await page.goto(step.page);
    await page.waitForFunction(() => window.harness !== undefined);
    const call = async (name, fn, args) => {
      let timer;
      try {
        results[name] = await Promise.race([
          page.evaluate(([fn, args]) => window.harness[fn](args), [fn, args]),
          new Promise((_, reject) => {
            timer = setTimeout(() => reject(new Error(`step ${name}: no result within ${STEP_TIMEOUT_MS} ms`)), STEP_TIMEOUT_MS);
          }),
        ]);
      } finally {
        clearTimeout(timer);
      }
    };
    await call(step.name, step.fn, step.args);
    if (step.reload) {
      await page.reload();
      await page.waitForFunction(() => window.harness !== undefined);
      await call(step.reload.name, step.reload.fn, step.reload.args);
    }
    results.userAgent ??= await page.evaluate(() => navigator.userAgent);
    await page.close();
  }
  process.stdout.write(JSON.stringify(results) + "\n");
} finally {
  await stop();
}
