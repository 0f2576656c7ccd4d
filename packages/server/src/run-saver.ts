import { CairnSaver } from '@cairn/langgraph';
import type { RunnableConfig } from '@langchain/core/runnables';
import type {
  ChannelVersions,
  Checkpoint,
  CheckpointMetadata,
} from '@langchain/langgraph-checkpoint';

/** LangGraph's own keys of a run's metadata: not the caller's, not kept with a checkpoint. */
const INTERNAL = new Set([
  'thread_id',
  'checkpoint_id',
  'checkpoint_ns',
  'checkpoint_map',
  'langgraph_step',
  'langgraph_node',
  'langgraph_triggers',
  'langgraph_path',
  'langgraph_checkpoint_ns',
]);

/**
 * `CairnSaver` as a LangGraph server uses it: each checkpoint also records the run's
 * metadata (`config.metadata`: the run's, its thread's and its assistant's), as the
 * LangGraph API server's checkpointer does, so a history can be filtered by it.
 */
export class RunSaver extends CairnSaver {
  override put(
    config: RunnableConfig,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    newVersions: ChannelVersions,
  ): Promise<RunnableConfig> {
    const run = Object.fromEntries(
      Object.entries(config.metadata ?? {}).filter(
        ([k, v]) =>
          !INTERNAL.has(k) && !k.startsWith('__') && v !== undefined && typeof v !== 'function',
      ),
    );
    return super.put(
      config,
      checkpoint,
      { ...run, ...metadata } as CheckpointMetadata,
      newVersions,
    );
  }
}
