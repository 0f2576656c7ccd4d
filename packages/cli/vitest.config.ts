import { defineConfig } from 'vitest/config';

// Every test runs the built `cairn` in a child process against a real SQLite file or the
// Postgres server: generous limits, so a busy machine never reads as failure.
export default defineConfig({
  test: { testTimeout: 60_000, hookTimeout: 60_000 },
});
