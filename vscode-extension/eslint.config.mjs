// Flat config: typescript-eslint's type-aware recommended rules, warnings fail the build (--max-warnings=0).
import js from "@eslint/js";
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["dist/**", "out/**", "node_modules/**", "e2e/fixture/**", "*.mjs"] },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      "@typescript-eslint/no-floating-promises": "error",
      "@typescript-eslint/no-misused-promises": ["error", { checksVoidReturn: { arguments: false } }],
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_" }],
      "@typescript-eslint/consistent-type-imports": "error",
      eqeqeq: ["error", "smart"],
      curly: "error",
      "no-console": ["error", { allow: ["error"] }],
    },
  },
  {
    files: ["e2e/**/*.ts", "src/test/**/*.ts"],
    rules: {
      "no-console": "off",
      // node:test's describe/test return promises the runner itself awaits.
      "@typescript-eslint/no-floating-promises": ["error", {
        allowForKnownSafeCalls: [{ from: "package", package: "node:test", name: ["describe", "test", "it", "suite"] }],
      }],
    },
  },
);
