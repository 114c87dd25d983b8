// @duckdb/node-api decodes VARCHARs with a default TextDecoder, which drops a leading U+FEFF: a value starting with
// one would read back changed (and its trace fail verification). Its accessors look this exported decoder up at each
// call, so one that keeps the BOM replaces it. Imported for that effect by every module that reads from DuckDB.
import { createRequire } from 'node:module';

const accessors = createRequire(import.meta.url)('@duckdb/node-api/lib/vectors/dataAccessors.js') as {
  textDecoder: TextDecoder;
};
if (!(accessors.textDecoder instanceof TextDecoder))
  throw new Error('@duckdb/node-api changed: dataAccessors.textDecoder is gone (see storage/duckdb-text.ts)');
accessors.textDecoder = new TextDecoder('utf-8', { ignoreBOM: true });
