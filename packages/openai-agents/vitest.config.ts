import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  // The README examples import the package by name.
  resolve: {
    alias: { '@cairn/openai-agents': fileURLToPath(new URL('src/index.ts', import.meta.url)) },
  },
  // PGlite takes a few seconds to start on a busy machine.
  test: { hookTimeout: 60_000, testTimeout: 30_000 },
});
