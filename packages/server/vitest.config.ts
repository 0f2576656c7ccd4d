import { defineConfig } from 'vitest/config';

// Real graphs on real databases: a busy machine stretches single tests well past 5 s.
export default defineConfig({ test: { testTimeout: 60_000, hookTimeout: 60_000 } });
