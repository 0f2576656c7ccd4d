import { postgresTestSkip } from '@cairn/store-postgres/testing';

export {
  dropSchema,
  freshSchema,
  POSTGRES_TEST_URL as POSTGRES_URL,
} from '@cairn/store-postgres/testing';

/** Why the server tests are skipped, or false when they run (CAIRN_REQUIRE_POSTGRES=1 never skips). */
export const SKIP_SERVER: string | false = await postgresTestSkip('thread');
