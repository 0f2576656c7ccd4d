// A small chat page on `useStream` of @langchain/langgraph-sdk/react, as an app would write
// it: the thread id in the URL (so a reload keeps it), rejoining a running stream on mount,
// and editing a sent message, which branches the thread. The browser test drives it.
import { useStream } from '@langchain/langgraph-sdk/react';
import { useState } from 'react';
import { createRoot } from 'react-dom/client';

type Message = { id?: string; type: string; content: unknown };
const apiUrl = new URL(location.href).searchParams.get('api')!;

function Chat() {
  const [threadId, setThreadId] = useState<string | null>(
    new URL(location.href).searchParams.get('thread'),
  );
  const stream = useStream<{ messages: Message[] }>({
    apiUrl,
    assistantId: 'agent',
    messagesKey: 'messages',
    threadId,
    reconnectOnMount: true,
    fetchStateHistory: true,
    onThreadId: (id) => {
      setThreadId(id);
      const url = new URL(location.href);
      url.searchParams.set('thread', id);
      history.replaceState(null, '', url);
    },
  });
  const [draft, setDraft] = useState('');
  const [editing, setEditing] = useState<{ id: string; text: string } | null>(null);
  const send = (text: string, checkpoint?: unknown) =>
    stream.submit(
      { messages: [{ type: 'human', content: text }], sleepMs: 40 } as never,
      {
        streamResumable: true,
        onDisconnect: 'continue',
        ...(checkpoint ? { checkpoint } : {}),
      } as never,
    );
  return (
    <main>
      <ol id="messages">
        {stream.messages.map((m, i) => {
          const meta = stream.getMessagesMetadata(m as never, i);
          const options = meta?.branchOptions ?? [];
          return (
            <li key={m.id ?? i} className={`message ${m.type}`} data-branches={options.length}>
              <span className="text">{String(m.content)}</span>
              {m.type === 'human' && (
                <button
                  type="button"
                  className="edit"
                  onClick={() => setEditing({ id: m.id!, text: String(m.content) })}
                >
                  edit
                </button>
              )}
              {options.length > 1 &&
                options.map((b) => (
                  <button
                    type="button"
                    key={b}
                    className="branch"
                    data-current={b === meta?.branch}
                    onClick={() => stream.setBranch(b)}
                  >
                    branch
                  </button>
                ))}
              {editing?.id === m.id && (
                <form
                  className="edit-form"
                  onSubmit={(e) => {
                    e.preventDefault();
                    send(editing!.text, meta?.firstSeenState?.parent_checkpoint);
                    setEditing(null);
                  }}
                >
                  <input
                    className="edit-input"
                    value={editing!.text}
                    onChange={(e) => setEditing({ ...editing!, text: e.target.value })}
                  />
                  <button type="submit">save</button>
                </form>
              )}
            </li>
          );
        })}
      </ol>
      <p id="status">{stream.isLoading ? 'streaming' : 'idle'}</p>
      <form
        onSubmit={(e) => {
          e.preventDefault();
          send(draft);
          setDraft('');
        }}
      >
        <input id="draft" value={draft} onChange={(e) => setDraft(e.target.value)} />
        <button id="send" type="submit">
          send
        </button>
      </form>
    </main>
  );
}

createRoot(document.getElementById('root')!).render(<Chat />);
