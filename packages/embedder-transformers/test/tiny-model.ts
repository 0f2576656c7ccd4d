/**
 * Writes a tiny BERT-shaped model directory that @huggingface/transformers loads like any
 * local model: config.json, a WordPiece tokenizer and onnx/model.onnx. The ONNX graph is
 * one Gather: each token's row of an embedding table is its "hidden state", so the
 * pipeline's mean pooling gives the mean of the words' vectors. Words of one concept
 * share a row direction, so synonyms embed close, as a real sentence model's would.
 * No protobuf library: the few messages the graph needs are encoded by hand.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export const TINY_DIMS = 8;

/** Words by concept; each concept is one axis of the 8-dimensional space. */
const CONCEPTS: Record<string, string[]> = {
  vehicle: ['car', 'automobile', 'vehicle', 'sedan', 'drive', 'bought', 'purchase', 'buy'],
  pet: ['dog', 'puppy', 'cat', 'kitten', 'pet'],
  food: ['bread', 'soup', 'dinner', 'cook', 'recipe'],
  weather: ['rain', 'sunny', 'forecast', 'weather', 'snow'],
  money: ['bank', 'loan', 'money', 'salary', 'budget'],
  garden: ['roses', 'garden', 'lawn', 'hedge', 'tulips'],
  travel: ['flight', 'train', 'hotel', 'passport', 'trip'],
};
const SPECIAL = ['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'];
const FILLER = ['i', 'a', 'the', 'my', 'new', 'is', 'to', 'we', 'last', 'week', 'tomorrow'];

// --- protobuf, the little that is needed --------------------------------------------
const varint = (n: number): number[] => {
  const out: number[] = [];
  let v = BigInt(n);
  do {
    let byte = Number(v & 0x7fn);
    v >>= 7n;
    if (v > 0n) byte |= 0x80;
    out.push(byte);
  } while (v > 0n);
  return out;
};
const key = (field: number, wire: number) => varint((field << 3) | wire);
const int = (field: number, n: number) => [...key(field, 0), ...varint(n)];
const bytes = (field: number, data: number[] | Uint8Array) => [
  ...key(field, 2),
  ...varint(data.length),
  ...data,
];
const str = (field: number, s: string) => bytes(field, [...Buffer.from(s, 'utf8')]);

/** TypeProto.Tensor of `elemType` with dims given as numbers or symbolic names. */
const tensorType = (elemType: number, dims: Array<number | string>) =>
  bytes(1, [
    ...int(1, elemType),
    ...bytes(
      2,
      dims.flatMap((d) => bytes(1, typeof d === 'number' ? int(1, d) : str(2, d))),
    ),
  ]);
const valueInfo = (name: string, elemType: number, dims: Array<number | string>) => [
  ...str(1, name),
  ...bytes(2, tensorType(elemType, dims)),
];

const FLOAT = 1;
const INT64 = 7;

function onnxModel(table: Float32Array, vocabSize: number): Uint8Array {
  const initializer = [
    ...int(1, vocabSize),
    ...int(1, TINY_DIMS),
    ...int(2, FLOAT),
    ...str(8, 'embeddings'),
    ...bytes(9, new Uint8Array(table.buffer)),
  ];
  const node = [
    ...str(1, 'embeddings'),
    ...str(1, 'input_ids'),
    ...str(2, 'last_hidden_state'),
    ...str(3, 'lookup'),
    ...str(4, 'Gather'),
  ];
  const graph = [
    ...bytes(1, node),
    ...str(2, 'tiny'),
    ...bytes(5, initializer),
    ...bytes(11, valueInfo('input_ids', INT64, ['batch', 'sequence'])),
    ...bytes(11, valueInfo('attention_mask', INT64, ['batch', 'sequence'])),
    ...bytes(12, valueInfo('last_hidden_state', FLOAT, ['batch', 'sequence', TINY_DIMS])),
  ];
  return Uint8Array.from([
    ...int(1, 8), // ir_version
    ...str(2, 'cairn-tiny-model'),
    ...bytes(7, graph),
    ...bytes(8, [...str(1, ''), ...int(2, 13)]), // opset 13
  ]);
}

/** Writes the model directory and returns its path. */
export function writeTinyModel(dir: string): string {
  const words = [...SPECIAL, ...Object.values(CONCEPTS).flat(), ...FILLER];
  const vocab = Object.fromEntries(words.map((w, i) => [w, i]));
  const table = new Float32Array(words.length * TINY_DIMS);
  Object.values(CONCEPTS).forEach((list, axis) => {
    for (const w of list) table[vocab[w]! * TINY_DIMS + axis] = 1;
  });
  // Filler words and [UNK] lean on the last axis, a little.
  for (const w of [...FILLER, '[UNK]']) table[vocab[w]! * TINY_DIMS + TINY_DIMS - 1] = 0.2;

  mkdirSync(join(dir, 'onnx'), { recursive: true });
  writeFileSync(
    join(dir, 'config.json'),
    JSON.stringify({
      architectures: ['BertModel'],
      model_type: 'bert',
      hidden_size: TINY_DIMS,
      vocab_size: words.length,
      max_position_embeddings: 512,
    }),
  );
  const special = (t: string) => ({ id: t, ids: [vocab[t]], tokens: [t] });
  writeFileSync(
    join(dir, 'tokenizer.json'),
    JSON.stringify({
      version: '1.0',
      truncation: null,
      padding: null,
      added_tokens: SPECIAL.map((content) => ({
        id: vocab[content],
        content,
        single_word: false,
        lstrip: false,
        rstrip: false,
        normalized: false,
        special: true,
      })),
      normalizer: {
        type: 'BertNormalizer',
        clean_text: true,
        handle_chinese_chars: true,
        strip_accents: null,
        lowercase: true,
      },
      pre_tokenizer: { type: 'BertPreTokenizer' },
      post_processor: {
        type: 'TemplateProcessing',
        single: [
          { SpecialToken: { id: '[CLS]', type_id: 0 } },
          { Sequence: { id: 'A', type_id: 0 } },
          { SpecialToken: { id: '[SEP]', type_id: 0 } },
        ],
        pair: [
          { SpecialToken: { id: '[CLS]', type_id: 0 } },
          { Sequence: { id: 'A', type_id: 0 } },
          { SpecialToken: { id: '[SEP]', type_id: 0 } },
          { Sequence: { id: 'B', type_id: 1 } },
          { SpecialToken: { id: '[SEP]', type_id: 1 } },
        ],
        special_tokens: { '[CLS]': special('[CLS]'), '[SEP]': special('[SEP]') },
      },
      decoder: { type: 'WordPiece', prefix: '##', cleanup: true },
      model: {
        type: 'WordPiece',
        unk_token: '[UNK]',
        continuing_subword_prefix: '##',
        max_input_chars_per_word: 100,
        vocab,
      },
    }),
  );
  writeFileSync(
    join(dir, 'tokenizer_config.json'),
    JSON.stringify({
      tokenizer_class: 'BertTokenizer',
      do_lower_case: true,
      model_max_length: 512,
      pad_token: '[PAD]',
      unk_token: '[UNK]',
      cls_token: '[CLS]',
      sep_token: '[SEP]',
      mask_token: '[MASK]',
    }),
  );
  writeFileSync(join(dir, 'onnx', 'model.onnx'), onnxModel(table, words.length));
  return dir;
}
