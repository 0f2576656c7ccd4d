import { defineConfig } from 'vitest/config';

// PGlite starts a WASM Postgres (seconds on a busy 2-core machine) and the server tests
// spawn processes: generous limits, so slowness never reads as failure. The files wait
// on the database more than they compute, so three run at once even on two cores.
export default defineConfig({
  test: { testTimeout: 90_000, hookTimeout: 180_000, maxWorkers: 3, minWorkers: 1 },
});
