import { runNativeServer, runNativeCeiling } from '../bench/native.ts';
console.log(await runNativeCeiling(5));
console.log(await runNativeServer('duckdb', {}, 5));
