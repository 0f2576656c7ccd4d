import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

// Real graphs on real databases, and worker processes: generous limits, so a busy machine
// never reads as failure. README examples import the package by its name: its source.
export default defineConfig({
  resolve: {
    alias: { '@cairn/server': fileURLToPath(new URL('./src/index.ts', import.meta.url)) },
  },
  test: { testTimeout: 60_000, hookTimeout: 60_000 },
});
