# github/release-create: the input document → the JSON body gh sends (--input).
{tag_name: .tag, name: (.name // .tag), body: (.notes // ""), draft: (.draft // false), prerelease: (.prerelease // false)}
  + if .target_commitish then {target_commitish: .target_commitish} else {} end
