import { existsSync } from 'node:fs';
import { type Browser, chromium } from 'playwright-core';

export const CHROMIUM = '/usr/bin/chromium';

/**
 * Whether the browser tests run: Chromium is installed, or `CAIRN_REQUIRE_CHROMIUM=1` (then
 * a missing Chromium fails them). When they are skipped it says so, naming `who`.
 */
export function chromiumTestsRun(who: string): boolean {
  const run = existsSync(CHROMIUM) || process.env.CAIRN_REQUIRE_CHROMIUM === '1';
  if (!run) {
    console.warn(
      `[${who}] ${CHROMIUM} is missing: the browser tests are skipped (apt-get install chromium; CAIRN_REQUIRE_CHROMIUM=1 makes this a failure)`,
    );
  }
  return run;
}

/** Headless Chromium as the tests run it: no sandbox, no GPU, no network of its own. */
export function launchChromium(extraArgs: string[] = []): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    args: [
      '--headless',
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--no-first-run',
      '--disable-quic',
      ...extraArgs,
    ],
  });
}
