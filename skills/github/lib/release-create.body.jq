# github/release-create: the input document → the JSON body gh sends (--input).
{tag_name: .tag, name: (.name // .tag), body: (.notes // ""), draft: (.draft // false), prerelease: (.prerelease // false)}
  + if .target then {target_commitish: .target} else {} end
