import { defineConfig } from 'vitest/config';

// PGlite takes a few seconds to start on a busy machine.
export default defineConfig({ test: { hookTimeout: 60_000, testTimeout: 30_000 } });
