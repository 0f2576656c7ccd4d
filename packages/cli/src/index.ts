export { COMMANDS, run } from './cli.js';
export { type CopyOptions, type CopyResult, copyStore, type TableCheck } from './copy.js';
export { type Counts, DUMP_VERSION, exportDump, importDump, linesOf } from './dump.js';
export type { Io } from './output.js';
