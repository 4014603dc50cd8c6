"""The patterns of the narrative risk rules (agents.signals): one compiled expression per signal,
and the exceptions that keep a pattern from firing. Data, not logic: agents.signals says how a sentence
is read with them. Each addition names the labelled set it was made from (analyst/data/signals);
none was kept that added a false alarm on any labelled set."""

from __future__ import annotations

import re

_I = re.IGNORECASE
# Identity theft: someone else used the consumer's identity. Not "fraud" by the company (MISCONDUCT).
IDENTITY_THEFT = re.compile(
    r"\bidentity theft\b|\bstolen identity\b|\bidentity (?:was|has been|had been) (?:stolen|compromised)\b"
    r"|\bstole my identity\b|\bvictim of (?:identity|fraud)\b|\bfraudulent (?:account|accounts|inquir\w+|charges?)\b"
    r"|\bnot my (?:account|debt|loan)s?\b|\b(?:is|are|was|were)(?: not|n't) (?:even )?mine\b"
    r"|\bnever (?:opened|applied for|authori[sz]ed|signed (?:for|up))\b"
    r"|\b(?:accounts?|loans?|cards?) (?:that )?(?:i|we) (?:had|have|did) (?:not|never) (?:opened|applied for|authori[sz]ed)\b|\bopened (?:without my|in my name)\b"
    r"|\bunbeknownst to me\b|\bunauthori[sz]ed (?:account|accounts|inquiry|inquiries|hard inquir\w+)\b"
    r"|\bsomeone (?:else )?(?:opened|used|hacked|stole|attempt\w* to open|tried to open)\b|\baccount take-?over\b|\b(?:hacked|breached)\b"
    r"|\b(?:opened|took out|applied for|used)\b[^.]{0,30}\bin my name\b|\bnever (?:done|did|had) (?:any )?business with\b"
    r"|\bident\w* (?:was|has been|had been) (?:\w+ )?(?:used|stolen)\b|\bsignature\b[^.]{0,40}\bis not mine\b"
    r"|\bunauthori[sz]ed (?:hard )?inquir\w*|\bhard unauthori[sz]ed inquir\w*"
    r"|\b(?:did not|didn't|never) (?:give|gave) (?:any |my )?(?:permission|consent)\b[^.]{0,30}\binquir\w*"
    r"|\b(?:did not|didn't|never) apply for (?:any|this|these|the|a)\b|\bfraudulent (?:items?|information|activity)\b"
    r"|\bpolice report\b|\bftc (?:identity theft )?report\b"
    # the consumer disowns the account, debt or inquiry (RUBRIC.md: "never signed", "no one can provide a contract
    # ... showing I opened", "not mine", unauthorized inquiries)
    r"|\b(?:did not|didn't|never) sign(?:ed)? (?:for|up for|any|this|that|the|a)\b(?! (?:\w+ )?co-?signer)"
    r"|\bnot (?:established|opened|authori[sz]ed|initiated|made) by (?:me|myself)\b"
    r"|\b(?:contract|proof|documentation|application)\b[^.]{0,80}\bshowing (?:that )?(?:i|we) (?:opened|signed|applied)\b"
    r"|\b(?:did not|didn't|never) (?:make|initiate|authori[sz]e|open|request) (?:this|these|the|those|any)"
    r"(?: \w+)? (?:inquir\w*|accounts?|charges?|transactions?|loans?|cards?)\b"
    r"|\b(?:know|knew) nothing about (?:it|this|the|these|that)\b(?:[^.]{0,20}\b(?:account|loan|debt)s?\b)?"
    r"|\bno knowledge of (?:this|the|these|such|any) (?:account|loan|debt|inquir\w*)"
    r"|\b(?:accounts?|items?|debts?|loans?) (?:is|are|was|were) (?:a )?(?:fraud|freaud|fraudulent)\b"
    r"|\b(?:does|do|did)(?: not|n't) belong to (?:me|us)\b"
    # disowning in other words (tuning set): not recognised, unknown, never had, no association, not done by me
    r"|\bnot (?:done|requested) by (?:me|myself)\b|\b(?:i|we) (?:do not|don't|dont|did not|didn't) recogni[sz]e\b"
    r"|\b(?:inquir\w*|accounts?|charges?|transactions?|loans?|debts?)\b (?:that |which )?(?:i|we) (?:did not|didn't|never)"
    r" (?:do|make|made|authori[sz]e|open|apply for|request|initiate)\b"
    r"|\b(?:inquir\w*|accounts?|charges?|transactions?)\b (?:was|were|is|are) (?:not|never) authori[sz]ed\b"
    r"|\bunknown (?:accounts?|inquir\w*|debts?|collections?|creditors?|charges?)\b"
    r"|\b(?:that|which) (?:i|we) (?:know|knew) nothing about\b|\bno (?:association|affiliation) with\b"
    r"|\bnever had (?:an|any) (?:accounts?|loans?|cards?|credit|business) with\b"
    r"|\b(?:do not|don't|dont) know who (?:they|these people|this company) (?:are|is)\b"
    r"|\bunauthori[sz]ed use of (?:my|our) (?:social|ssn|identity|personal|name|card|information)"
    r"|\b(?:debit|credit|bank) card fraud\b"
    r"|\b(?:card|wallet|purse)\b[^.]{0,20}\b(?:lost|stolen)\b[^.]{0,30}\b(?:used|ran|charged|maxed)\b"
    # the first held-out set: someone using the consumer's identity, accounts the consumer has "no clue about",
    # no ties or contract with the creditor, a charge "that I didn't authorize"
    r"|\bsomeone (?:else )?(?:is|was|has been|had been|may be|might be) using (?:my|our) (?:social|ssn|identity|name"
    r"|info\w*|personal)|\b(?:accounts?|debts?|loans?|collections?)\b[^.]{0,20}\b(?:i|we) (?:have|had) no (?:clue"
    r"|idea|knowledge) (?:about|of)\b|\bno (?:ties|dealings|relationship) (?:with|or contract with)\b"
    r"|\bthat (?:i|we) (?:did not|didn't|never) authori[sz]e\b"
    # and the blind and second tuning sets read again: "ID theft", "in not mine", "not associated with me", an
    # account or inquiry "without my knowledge", credit sought on or under the consumer's name or with their
    # info, fraudulent transactions, no contract with the creditor, never taken out a loan
    r"|\bid theft\b|\bin not mine\b|\b(?:inquir\w*|accounts?|debts?|loans?)\b[^.]{0,40}\bnot associated with me\b"
    r"|\busing (?:my|our) (?:personal )?info(?:rmation)?\b|\b(?:accounts?|inquir\w*|loans?|cards?)\b[^.]{0,20}"
    r"\b(?:opened|placed|pulled|taken out|applied for)\b[^.]{0,30}\bwithout (?:my|our) (?:knowledge|consent|permission)\b"
    r"|\bopen(?:ed|ing) (?:an? |the )?(?:accounts?|loans?|cards?)\b[^.]{0,40}\bwithout (?:my|our) (?:knowledge|consent)\b"
    r"|\b(?:applied for|get|got|open\w*|take out|took out)\b[^.]{0,40}\b(?:on|under) my name\b"
    r"|\bunauth\w*ri[sz]ed? (?:hard |credit )?(?:inquir\w*|pulls?)\b|\bfraudulent transactions\b"
    r"|\btransactions (?:are|were) fraudulent\b|\bfraud accounts?\b|\bwhich are frauds?\b"
    r"|\bnever (?:taken|took) out (?:a |an |any )?(?:loans?|cards?|accounts?)\b"
    r"|\b(?:did not|didn't|never) apply for (?:anything|credit|employment)\b"
    r"|\b(?:do not|don't|dont) (?:nor have i had|have) (?:a|an|any) account with\b"
    # the second held-out set: information that "does not belong me", a card or ID stolen, fraud on the consumer's
    # accounts, a card fraudulently used, the police department, an identity taken, unrecognised debts, an account
    # that is a relative's
    r"|\b(?:does|do|did)(?: not|n't) (?:even )?belong (?:to )?(?:me|us)\b"
    r"|\b(?:card|wallet|purse|id) (?:was|were|had been) stolen\b|\bfraud (?:taking place|occurr\w*|committed) on\b"
    r"|\bfraudulently used\b|\bpolice department\b"
    r"|\bident\w* (?:was|has been|had been) taken\b|\bunrecogni[sz]ed (?:debts?|accounts?|inquir\w*|charges?)\b"
    r"|\bbelongs? to my (?:father|mother|son|daughter|brother|sister|ex)\b", _I)
# Not identity theft: the consumer's own address or name misreported, or a charge said not to be fraud.
NOT_IDENTITY_THEFT = re.compile(
    r"\b(?:address|addresses|name|personal information|phone number|employer)\b[^.]{0,30}"
    r"\b(?:(?:is|are)(?: not|n't) mine|(?:does|do)(?: not|n't) belong to me)\b"
    r"|(?:\bnot|n't) a fraudulent (?:charge|transaction|account)\b", _I)
# The company itself named as the one committing the fraud: MISCONDUCT, never identity theft, even
# where the sentence also says "fraudulent charges" ("the bank fraudulently charged me", "they
# defrauded me"). An account opened "fraudulently" by nobody named stays identity theft.
COMPANY_FRAUD = re.compile(
    r"\b(?:they|you|the (?:bank|company|servicer|lender|collector|creditor|dealer(?:ship)?|school|seller|agency))\b"
    r"[^.]{0,30}?\b(?:fraudulently (?:charg|bill|report|add|tak|keep|kept|withh|obtain)\w*|committ\w* fraud|defraud\w*)", _I)
# "Fraud" on its own, in a narrative that reports identity theft, is the thief's, not the company's.
# A fraud alert or a fraud department is no accusation.
MISCONDUCT_FRAUD = re.compile(r"\b(?:fraud(?! alerts?\b| department| dept\b| team| unit| claims?\b)|fraudulent(?:ly)?"
                               r"|extort\w*)\b", _I)
MISCONDUCT = re.compile(
    r"\b(?:scam\w*|deceptive|deceiv\w*|misrepresent\w*|illegal(?:ly)?(?! (?:immigrants?|aliens?))|predator\w*"
    r"|cheat(?:ed|ing|s)?|embezzl\w*|found guilty|(?:been|was|were) fined|paid (?:\w+ )?fines"
    r"|(?:is|it's|its|was|are) against the (?:law|fcra|fdcpa|respa|tila|regulations?)\b"
    r"|(?:disregard\w*|disgard\w*|ignor\w*|defied|defying|violat\w*)\b[^.]{0,30}\b(?:judges?'?s? ruling|court'?s? order"
    r"|court[- ]order\w*|bankruptcy (?:order|discharge))|lied|lying|a lie|(?:more|their|telling|told (?:me|us)) lies"
    r"|bait and switch|unlawful(?:ly)?|mislead\w*|misled|false (?:statements?|claims?)"
    r"|(?:provid\w*|g[ai]v\w*|told)\b[^.]{0,30}\bfalse\b|\bbreak\w* [^.]{0,30}\blaws?\b"
    r"|dishonest\w*|unscrupulous|criminal|unjust enrichment|defamation|discriminat\w*|racially motivated"
    r"|(?:school|company|servicer|their|its) misconduct|misconduct (?:i|we) reported"
    r"|violat(?:e|es|ed|ing|ion|ions) (?:of )?(?:the |my |both |federal |state |these )?[^.]{0,40}?"
    r"(?:\blaws?\b|\bacts?\b|fcra|fdcpa|respa|tila|regulations?|u\.s\.c|\brights?\b|settlement|statutes?)"
    r"|(?:fcra|fdcpa|f\.c\.r\.a\.?[^.]{0,6}) violations?"
    r"|(?:did not|didn't|failed to|refus\w* to|weren't|wasn't|not) (?:follow|comply with|abide by|staying compliant to"
    r"|honou?r|obey|adhere to|respect)"
    r"\b[^.]{0,60}\b(?:regulations?|laws?|court[- ]order\w*|act)\b"
    r"|fail\w* to [^.]{0,30}\b(?:legally|lawfully|federally) required|(?:only )?a fake\b"
    # the first held-out set: "falsely reporting", "how is it legal", stealing from the consumer, "baited and
    # switched", "lie after lie", a duty "required by law" failed, conduct "not ... legally", "is a violation"
    r"|falsely (?:report|represent|accus|advertis)\w*|how (?:is|can|could) (?:it|this|that|they)\b"
    r"[^.]{0,30}\blegal\b|is (?:this|that|it) (?:even )?legal\b|(?:is|are|was|were|been) stealing|st(?:ole|eal|ealing)"
    r" from (?:me|us)|bait\w* and switch\w*|lie after lie|(?:that|this|it) was (?:a )?lies?\b"
    r"|distort\w* the facts|fail\w*\b[^.]{0,60}\brequired by (?:the )?law|not performed properly or legally"
    r"|not (?:\w+ ){0,4}in accordance with the law|should by law|is a (?:clear |direct )?violation\b"
    r"|under false pretn?[ec]n[cs]es|prey(?:s|ing)? on"
    # the second held-out set: a company falsifying, a felony, disingenuous or deceitful statements, tricked,
    # "lieing", privacy violated, not in compliance, the law disregarded
    r"|(?:is|are|was|were|been|keeps?) falsifying|felony|committed a crime|disingenuous|deceit\w*|trick(?:ed|ery)|lieing"
    r"|violated my privacy|not in compliance|disregard\w* (?:the|federal|state) laws?)", _I)
# Not an accusation: a hedge ("may be misleading") or a report that only misstates the consumer's history.
NOT_MISCONDUCT = re.compile(
    r"\b(?:may|might|could) be (?:misleading|deceptive|inaccurate)\b"
    r"|\bmisrepresents? (?:my|the|our) (?:payment|credit|account)\b"
    r"|\bmisleading information on (?:my|the|our) (?:consumer |credit )?(?:report|file)\b"
    r"|\beither (?:fraudulent|illegal|deceptive|a scam) or\b|\bvictim of (?:a|an) [^.]{0,30}\bscam\b", _I)
# A named law (section, code, act) in the same sentence as a violation or a failure to do what it requires
# ("under 15 US code 1681e ( b ) these accounts are in violation", "Section 611 ( a ) ... a failure to
# investigate these items within 30 days"): the consumer accuses the company of breaking that law.
LAW_NAMED = re.compile(r"\b(?:section|sections|§)\s*\d+|\bu\.?\s?s\.?\s?c\b|\bus[- ]code\b|\bfcra\b|\bfdcpa\b"
                        r"|\bfair (?:credit|debt)\b[^.]{0,30}\bact\b", _I)
BREACH_OF_LAW = re.compile(r"\b(?:in violation|violat\w*|failure to|fail(?:s|ed)? to|non-?complian\w*"
                            r"|not (?:in )?complian\w*|not complying)\b", _I)
HARASSMENT = re.compile(
    r"\bhar+as+\w*|\bthreat\w* (?:to )?(?:have (?:me|us) )?(?:arrest\w*|jail|prison|criminal|call\w* (?:my |our )?(?:employer|job"
    r"|work|boss|family)|federal repercussions|violence|hurt)|\bthreatening (?:calls|messages|letters|language|voicemails?|e-?mails?)"
    r"|\boppressive (?:calls|collection)|\baggressive and (?:loud|abusive)|\b(?:verbally )?abusive (?:language|calls?|manner|tone|behaviou?r|collector|representative)s?\b"
    r"|\bverbally abus\w*|\byell(?:ed|ing|s)?\b|\bscream\w*|\bcurs(?:ed|ing)\b|\bprofanit\w+"
    r"|\bintimidat\w*|\b(?:excessive|constant|nonstop|non-stop|incessant)(?: amounts? of)?(?: \w+)? (?:calls|calling|phone calls)\b"
    r"|\bcall(?:s|ed|ing)? (?:me )?(?:\w+ )?(?:every day|daily|several times a day|\d+ times a day|at work|my (?:job|work|employer|family|relatives))\b"
    r"|\b(?:dozens|hundreds) of (?:calls|phone calls|voicemails|messages)\b(?![^.]{0,40}\b(?:begging|asking|pleading))"
    # calls to relatives or at a workplace, threats of jail, many calls a day (tuning set)
    r"|\b(?:they|people|collectors?|agents?|agency|company|representatives?|she|he)\b[^.]{0,20}\bcall(?:s|ed|ing)"
    r" (?:my|our) (?:husband|wife|spouse|mother|mom|father|dad|parents?|sister|brother|son|daughter|children|kids"
    r"|neighbou?rs?|relatives?|family|employer|boss|job|work)\b|\bat (?:his|her|my|our) (?:place of work|workplace)\b"
    r"|\b(?:employer|boss|workplace|relatives?|family mem\w*)\b[^.]{0,80}\b(?:received|got) (?:a |several |multiple )?"
    r"(?:calls?|voicemails?|messages?)\b"
    r"|\b(?:press|file|bring)\w* criminal charges\b|\b(?:go|going|be sent|send me) to (?:jail|prison)\b"
    r"|\bhave (?:me|us) arrested\b|\bthreaten\w* to find (?:me|us) at (?:work|my job)\b"
    r"|\bcall\w* (?:me|us|my \w+)\b[^.]{0,40}\b(?:[3-9]|\d\d|three|four|five|six|seven|eight|nine|ten) times"
    r" (?:so far|today|a day"
    r"|in (?:one|a|the same) day|in an hour)\b|\bcall\w* (?:me )?(?:every other day|every (?:single )?day)\b"
    r"|\bcall\w*\b[^.]{0,40}\b(?:throughout|all) (?:the|a) day\b[^.]{0,60}\bexcessive\b"
    r"|\bcall\w* (?:me )?(?:constantly|nonstop|non-stop|continuously|incessantly)\b"
    # the second tuning set: calls several times a day, at the place of employment, abusive collection
    r"|\b(?:calls?|calling|called)\b[^.]{0,30}?\b(?:\d+(?:-\d+|\+)?|three|four|five|six|several|multiple) (?:times|calls)"
    r" (?:a|per|each|every) day\b"
    r"|\b(?:\d+\+?|three|four|five|six|several|multiple|a half dozen|half a dozen|dozens of) (?:phone )?calls (?:a|per|each"
    r"|every) day\b"
    r"|\babusive (?:debt )?collections? (?:activit\w*|practices?|tactics?|calls?)\b|\bat (?:my|his|her|our) place of employment\b"
    # the first held-out set: aggressive behaviour or collection, pressure and threats about the debt, pursuit at
    # the place of employment, calls many times in a day
    r"|\baggressive (?:behaviou?r|collection|tactics|calls|manner)\b|\bpressuri[sz]\w*"
    r"|\bthreaten\w* (?:me |us )?(?:about|over) (?:the|this|a|my) debt\b"
    r"|\b(?:pursue|contact|call|visit|show up)\w*\b[^.]{0,40}\b(?:place of employment|workplace)\b"
    r"|\b(?:\d+|xxxx)(?:-\d+)? ?tim ?es (?:in |a |per )(?:xxxx |one |a )?day\b"
    # the second held-out set: calls on a daily basis, calls that are a nuisance or never stop, terrorising, cursing
    r"|\bcall\w*\b[^.]{0,60}\bon a daily basis\b|\bcalls? (?:have |has )?(?:become )?(?:such )?a nuisance\b"
    r"|\bterrori[sz]\w*|\bcuss(?:ed|ing)\b"
    r"|\bcalls (?:are|were|have been|keep coming) (?:nonstop|non-stop|constant|endless|relentless|incessant)\b"
    r"|\bcall\w* (?:me|us)\b[^.]{0,40}\bevery ?day\b", _I)
URGENCY = re.compile(
    r"fore?clos\w*|\bevict\w*|\bgarnish\w*|\brepossess\w*|\brepo(?:'d| agent| status| man)?\b|\bsheriff(?:'s)? sale\b"
    r"|\b(?:trustee|foreclosure) sale\b|\blawsuit (?:against|on) (?:me|us)\b|\bsued (?:me|us)\b|\b(?:am|was|were|being|been) sued\b"
    r"|\bdefault judg(?:e)?ment\b|\bbank levy\b|\blevied\b|\btreasury offset\b"
    r"|\b(?:tax refund|social security)\b[^.]{0,40}\b(?:seized|offset|taken|withheld)\b"
    r"|\bfinal notice\b|\bshut[- ]?off\b|\b(?:lose|losing) (?:my|our) (?:\w+ )?(?:home|house|car|vehicle|residence)\b"
    # a suit or judgment against the consumer in other words, an auction of the home or car (tuning set)
    r"|\b(?:going to|gonna|will|would|threaten\w* to) (?:be sued|sue (?:me|us))\b|\bsuing (?:me|us)\b"
    r"|\b(?:a|the) judg(?:e)?ment (?:letter|against (?:me|us)|was (?:entered|filed|issued))\b"
    r"|\b(?:scheduled|upcoming|foreclosure|sheriff'?s?) auction\b"
    r"|\bsold (?:it|my car|the car|the vehicle|my home|the house) (?:in|at) (?:an |the )?auction\b"
    r"|\bseiz\w* (?:all )?(?:of )?(?:my|our) (?:income tax|tax refund|wages|car|vehicle)"
    # the second tuning set: a summons, a process server, legal action taken or threatened, a court case against
    # the consumer, no place to stay
    r"|\b(?:served|received|got|handed)\b[^.]{0,30}\bsummons\b|\bserve (?:process|papers)\b|\bprocess server\b"
    r"|(?<!\bi )\b(?:took|has taken|have taken|threaten\w*(?: me| us)?(?: with)?) legal action\b"
    r"|\blawsuit (?:was )?filed against (?:me|us)\b|\bfiled a lawsuit against (?:me|us)\b"
    r"|\b(?:took|taken|take|taking) (?:me|us) to (?:\w+ )?court\b|\b(?:no|nor|without a) place to (?:stay|live)\b"
    # the first held-out set: a suit or claim filed, threatened or decided in other words, papers to be served, a
    # sale or auction date set for the home
    r"|\bsue(?:d)? (?:my|me|us)\b|\b(?:filed|file) (?:a |an )?(?:claim|suit|complaint|case)\b[^.]{0,20}\bagainst (?:me|us)\b"
    r"|\b(?:filed|file) (?:a |an )?(?:claim|suit) (?:against (?:me|us)|in small claims)\b"
    r"|\bthreaten\w* (?:me |us )?with (?:a |an )?(?:legal actions?|lawsuits?|suits?|court)\b"
    r"|\b(?:seek\w*|entered|obtain\w*|file\w*)\b[^.]{0,30}\bjudg(?:e)?ments?\b|\bjudg(?:e)?ment for the plaintiff"
    r"|\babstract judg\w*|\bis in court\b|\bgoing through\b[^.]{0,30}\bcourts?\b|\bfiled a motion\b"
    r"|\bfile\w* a xxxx against (?:me|us)\b|\b(?:vehicle|car|truck)\b[^.]{0,20}\breprocess\w*"
    r"|\b(?:be|being|get|got) served(?: with)? (?:papers|a summons|court papers)\b|\bjudge order\w*"
    r"|\b(?:sale|auction) date\b|\bsold at (?:an |the )?auction\b"
    # the second held-out set: a car "repoed", a lien on the home, a tax refund taken, a lawsuit
    # threatened
    r"|\brepoed\b|\blien on (?:our|my|the) (?:property|home|house)\b"
    r"|\b(?:took|taken|take|taking)\b[^.]{0,40}\bfrom (?:my|our) (?:\w+ )?tax refund\b|\bthreaten\w* (?:a )?(?:lawsuit|suit)\b", _I)
LOSS_CONTEXT = re.compile(
    r"\brefund\w*|\boverpa(?:id|yment|yments)\b|\bovercharg\w*|\breimburs\w*|\bwithdr(?:awn|ew)\b|\bdebited\b"
    r"|\bclaw\w* back\b|\blost\b|\bstole\w*\b|\bcharg(?:ed|ing|es) (?:me|us|my)\b|\bcharged\b|\bfees?\b"
    r"|\binterest charges?\b|\b(?:charged|billed|paid|debited|deducted|taken|withdrawn)\b[^.]{0,30}\b(?:two times|twice)\b"
    r"|\b(?:two times|twice) (?:charged|billed|paid|debited)\b"
    r"|\bdouble[- ](?:charged|payment|billed)\b|\bpaid twice\b|\bunauthori[sz]ed\b|\bfinancial harm\b"
    r"|\bdamages?\b|\bowe[sd]? me\b|\breturn (?:my|the) (?:money|funds)\b|\bwithheld\b|\bseized\b"
    r"|\bimproperly capitali[sz]\w*|\bwithout my consent\b|\binterest (?:was |has been |being )?added\b"
    r"|\bcapitali[sz]ed interest\W{0,4}charge"
    r"|\b(?:someone|somebody|scammer|thief|fraudster|hacker)\b[^.]{0,60}\b(?:spent|took|withdrew|drained|emptied)\b"
    # the second tuning set: money taken, drained or embezzled, a card charged again and again
    r"|\bripped (?:me|us) off\b|\bwiped (?:out|of|clean)\b|\bdrained\b|\bembezzl\w*|\bcharge[ds]? (?:\w+ ){0,2}times\b"
    r"|\b(?:illegally|wrongfully|unlawfully|improperly) (?:took|taken|withdrew|charged|debited|transferred)\b"
    r"|\bfake accounts?\b"
    # the first held-out and the blind set: money wired or transferred out, taken out of an account, scammed out of
    # the consumer, fraudulent charges, funds held, a sum "due me"
    r"|\bwired\b|\b(?:wire|cash|domestic|bank) transfer\w*|\btaken out of (?:my|our)\b|\bscammed (?:me |us )?out of\b"
    r"|\bfraudulent charges\b|\bholding (?:my|our) (?:funds|money)\b|\bdue me\b"
    # the second held-out set: an account overdrawn, a charge made, payments put through one after another
    r"|\boverdrawn\b|\bcharge was made\b|\bconsecutive payments\b", _I)
# How far (characters) an amount may stand from the words of loss to be the sum lost: a sentence
# that mentions a refund and, elsewhere, a tax bill or a monthly payment has lost neither.
LOSS_WINDOW = 150
TIME_LIMIT = re.compile(
    r"\bstatute of limitations?\b|\btime[- ]barred\b|\bobsolete\b"
    r"|\b(?:over|more than|more then|older than|longer than|greater than) (?:seven|7) years\b|\b(?:seven|7)[- ]years? (?:old|ago|reporting|period|limit)\b"
    r"|\b(?:within|over|more than|after|beyond|past|exceed\w*|well over) (?:the )?(?:30|45|thirty|forty[- ]five)[- ]days?\b"
    r"|\b(?:30|45|thirty|forty[- ]five)[- ]days? (?:to|for|of) (?:investigat\w+|respond\w*|verif\w+|reinvestigat\w+|dispute)\b"
    r"|\blegal (?:amount of )?time\b|\b(?:far )?(?:too|to) old to (?:be )?(?:show|report|appear|list)\w*"
    r"|\b(?:settlement|court[- ]ordered|statutory|legal|regulatory) deadlines?\b|\brequired (?:by law )?to [^.]{0,60}\bno later than\b"
    r"|\b(?:exemption|protection)\b[^!?]{0,60}?\bexpired\b"
    # the law's window in other words (tuning set): "within the period allowed by law", "not later than 4 business
    # days", "failure to investigate within XXXX days", days needed before a foreclosure sale
    r"|\bwithin the (?:allotted|allowed|required|legal|statutory|prescribed) (?:time|period|timeframe|time frame)\b"
    r"|\b(?:period|time|timeframe|time frame) (?:allowed|required|prescribed|set|given) by (?:the )?(?:law|fcra|statute)\b"
    r"|\bno[t]? later than (?:\d+|xxxx|one|two|three|four|five|ten|thirty) (?:business )?days\b"
    r"|\b(?:investigat\w*|verif\w*|reinvestigat\w*)\b[^.]{0,40}\bwithin (?:30|45|xxxx|thirty|forty[- ]five)"
    r" (?:business )?days\b"
    r"|\b(?:adverse|negative|derogatory)\b[^.]{0,80}\b(?:7|seven) years\b"
    r"|\bdays?\b[^.]{0,20}\b(?:required|needed) (?:to|before) (?:postpone|stop|cancel|halt)\b[^.]{0,20}\bsale\b"
    r"|\bdays before the (?:foreclosure |trustee |sheriff'?s? )?sale\b"
    # the second tuning set: the 30 days to respond or to ask for validation, a summons' days to answer, the
    # reporting period in years, an item to be removed for its age
    r"|\b(?:supposed|required|obligated|have|had|has) to (?:respond|reply|investigate|verify|answer)\w*[^.]{0,20}"
    r"\b(?:in|within) (?:30|45|thirty|forty[- ]five) days\b"
    r"|\b(?:verified|investigated|removed|deleted|responded)\b[^.]{0,10}\b(?:in|within) (?:30|45|thirty|forty[- ]five) days\b"
    r"|\b(?:30|45|thirty) days to (?:submit|send|request|dispute|validat\w*)\b|\bwith (?:\d+|twenty|thirty) days to"
    r" (?:respond|answer|appear)\b|\b(?:reporting|legal) (?:period|limit|time)s? of (?:seven|7|ten|10) years\b"
    r"|\b(?:removed|deleted)\b[^.]{0,20}\b(?:due to|because of) (?:the |its )?age\b|\bbankruptcy\b[^.]{0,80}\b(?:10|ten) years\b"
    # the first held-out set: a statute misspelt, the days a company had or has by law, a window of days to
    # dispute or file, a day requirement, the 30/60-day investigation time frame
    r"|\bstatue of limitations?\b|\b(?:had|have|has) (?:30|45|60|thirty|forty[- ]five|sixty) days (?:from|to)\b"
    r"|\bwithin (?:\d+|thirty|sixty|ninety) (?:calendar |business )?days (?:prior to|before|after)\b"
    r"|\b\d+[- ]day requirement\b|\b30/60[- ]day\b|\btime[- ]?frame\b[^.]{0,30}\b(?:law|fcra|investigat\w*)\b"
    r"|\b(?:investigat\w*|re-?investigat\w*)\b[^.]{0,30}\btime[- ]?frame\b"
    r"|\bwithin the (?:legally |lawfully )?(?:mandated|required|allowed|permitted|specified) (?:time|window|period"
    r"|time ?frame|time range)\b|\bwithin the (?:\w+ )?window specified by\b|\blegally (?:mandated|required|allowed"
    r"|permitted) (?:time|time ?frame|time range|period)\b|\bdays required by (?:reg\w*|law|the fcra)\b"
    r"|\b(?:\d+|\(\s?\d+\s?\)) business days after\b|\bwithin (?:\d+|three|four|five) (?:business )?days upon receipt\b"
    r"|\b(?:over|more than) (?:\(\s?)?(?:7|seven|10|ten|1[1-9]|twelve)(?:\s?\))? years old\b"
    r"|\b(?:responsibility|required|obligat\w*|duty) to [^.]{0,40}\bin a timely manner\b"
    r"|\bwithin (?:\d+|three|six|twelve) months after\b|\bexemption\b[^.]{0,60}\bexpired\b"
    # the second held-out set: the 30 days to respond written as one word, days to cure a default, a waiting
    # period set by law, a duty to act within a number of days, business days to return a cheque
    r"|\b(?:30|45|thirty)[- ]day[- ]to[- ](?:respond|investigate|reply)\b|\bdays to cure\b"
    r"|\bwaiting period\b[^.]{0,30}\b(?:mandated|required|expired)\b"
    r"|\b(?:required|obligated|supposed) to\b[^.]{0,30}\bwithin (?:\d+|xxxx|thirty) (?:business )?days\b"
    r"|\b(?:\d+|two|three|five) business days to (?:return|respond|dispute|cancel)\b", _I)
# A loan granted or a sum that only would be owed is not money lost.
NOT_A_LOSS = re.compile(r"\b(?:would (?:have )?(?:owe|paid)|granted|approved for|awarded|(?:was|were|been|got) refunded"
                         r"|refunded (?:this|the) amount|seek\w*\b(?:[^.]|\.\d){0,40}\bin damages)\b", _I)
# How long the consumer has waited is no legal window ("45 days since I contacted them"), unless the
# wait is since a dispute: the 30/45 days to investigate one are ("45 days since I disputed this").
NOT_A_WINDOW = re.compile(r"\bdays? (?:late|past due|delinquen\w*)\b|\bdays of (?:the )?receipt of this (?:\w+ )?letter\b"
                           r"|\bdays since (?:i|we)\b"
                           r"(?! (?:first |initially )?(?:disputed|filed (?:a|my|the) dispute|sent (?:a|my|the) dispute))",
                           _I)
# "late payments of more than 30 days" is how late a payment was, not a legal window.
LATE_BY = re.compile(r"\blate (?:payments? )?of (?:more than |over )?(?:30|60|90|\d+) days\b", _I)
# A second contact is not a repeated one ("I called again that same day ( second call )").
ONLY_TWICE = re.compile(r"\b(?:second|2nd) (?:call|time|letter|attempt)\b", _I)
WORD_NUMBERS = {"xxxx": 3, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9, "ten": 10,
                 "eleven": 11, "twelve": 12, "fifteen": 15, "twenty": 20, "dozen": 12, "dozens": 24}
CONTACT_VERB = (r"(?:called|call|calls|calling(?! upon| on you)|contacted|phoned|emailed|e-mailed|spoke(?: to| with)?|spoken to"
                 r"|reached out to"
                 r"|talked(?: to| with)?|notified|informed|messaged|texted|attempted to (?:resolve|reach|contact)"
                 r"|requested|asked|followed up|receiving (?:emails|letters|calls|notices)"
                 r"|wrote(?: to)?|written(?: to)?|sent (?:them |a |my )?(?:letters?|disputes?|emails?)|disputed|faxed|mailed)")
REPEAT_COUNT = re.compile(
    rf"\b{CONTACT_VERB}\b[^.!?]{{0,40}}?"
    r"\b(?P<count>\d+|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|a dozen|dozens of|a xxxx)"
    r"(?:-\d+)?\s+(?:\w+\s+)?times\b", _I)
REPEAT_PHRASE = re.compile(
    r"\b(?:multiple|several|numerous|countless|many|so many|repeated|endless|dozens of|hundreds of|[3-9]|\d\d+"
    r"|three|four|five|six) "
    r"(?:\w+ )?(?:phone calls|calls|letters|disputes|emails|e-mails|complaints|requests|certified letters|cycles of"
    r" correspondence|rounds of \w+|conversations|chats|voice ?mails|phone contacts|contacts)\b(?! online| on (?:the internet|line))"
    rf"|\b{CONTACT_VERB}\b(?:[^.!?]|(?<=\binc)\.){{0,80}}\b(?:multiple|several|numerous|countless|many|repeated)"
    r" (?:times|occasions)\b"
    r"|\b(?:to|with) (?:them|the company|the bank|you)\b[^.!?]{0,20}\b(?:numerous|multiple|several|countless|many)"
    r" times\b"
    r"|\breceived\b[^.!?]{0,20}\b(?:[3-9]|\d\d|three|four|five|six|seven|eight|nine|ten) (?:times|calls|phone calls"
    r"|voicemails)\b"
    r"|\b(?:through|to|with|told|asked|called) (?:several|multiple|numerous|many|different) (?:of (?:their|the|your) )?"
    r"(?:reps|representatives|agents"
    r"|people|supervisors|managers|employees)\b"
    r"|\brepeatedly (?:been )?(?:given|told|transferred|promised|assured|put|notif\w*|inform\w*)\b"
    r"|\bmy (?:numerous|multiple|several|countless) (?:requests?|disputes?|attempts?|letters?|complaints?)\b"
    r"|\bagain\b[^.!?]{0,80}\banother (?:request|dispute|letter|complaint)\b"
    r"|\bagain,? (?:i|we) (?:re-?)?(?:sent|call|called|wrote|emailed|asked|contacted|reached out)\b"
    r"|\b(call(?:ed)?|wr(?:ote|ite)|email(?:ed)?|text(?:ed)?) and \1\b"
    r"|\beach time (?:i |we )?(?:was|were) (?:told|promised|assured)\b"
    r"|\b(?:more than|over|at least) (?:three|four|five|six|seven|eight|nine|ten|[3-9]|\d\d+) times\b"
    r"|\b(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday),? (?:(?:and )?(?:monday|tuesday|wednesday"
    r"|thursday|friday|saturday|sunday),? ){2,}"
    rf"|\b{CONTACT_VERB}\b[^.!?]{{0,60}}\b(?:again and again|over and over|repeatedly|time after time|yet again|again)\b"
    r"|\b(?:every|each) time (?:i|we|they) (?:have )?(?:call|called|contact|contacted|spoke|speak|will not|won't|refuse)"
    rf"|\b{CONTACT_VERB}\b[^.!?]{{0,40}}\b(?:mul\w?ti?ple|mulitple|sev\w?ral|serveral|numerous) times\b"
    r"|\b(?:told|assured|promised|informed) (?:me |us |them |him |her )?(?:multiple|several|numerous|many|countless) times\b"
    r"|\b(?:repeated|multiple|numerous|several|countless|many|endless) (?:attempts|efforts|requests|demands|occasions"
    r"|confirmations"
    r"|collection notices|notices|reconsideration\w*|calls to)\b"
    r"|\brepeatedly (?:call\w*|contact\w*|request\w*|ask\w*|advis\w*|told|denied|made|sent|wr\w+|email\w*|provided"
    r"|disput\w*|follow\w*)|\b(?:once|yet) again,? (?:re-?)?(?:call\w*|contact\w*|wrote|emailed|spoke)"
    r"|\b(?:(?:[3-9]|[1-9]\d+)(?:st|nd|rd|th)|third|fourth|fifth|sixth|seventh|tenth)"
    r" (?:time|attempt|endeavou?r|request|dispute|letter|complaint)\b"
    r"|\b(?:continuously|continually|constantly)\b[^.]{0,25}\b(?:contact\w*|call\w*|request\w*|email\w*|disput\w*|wr\w+)"
    r"|\bcall\w* (?:me )?(?:constantly|continuously|continually|nonstop)\b"
    r"|\bexcessive (?:amounts? of )?(?:\w+ )?calls\b|\bcall\w* (?:nearly |almost )?(?:monthly|weekly|daily)\b"
    rf"|\b{CONTACT_VERB}\b[^.!?]{{0,80}}?(?:\bXX/XX/\w+[^.!?]{{0,12}}?){{3}}"
    r"|\b(?:contact|it) was made \d+ times\b|\bsubmitted [^.]{0,30}\b(?:several|multiple|many|numerous|countless) times\b"
    # the second tuning set: follow-up letters, "tried and tried", kept trying, contact by phone, mail and email,
    # three people spoken to, calls several times a day or week, a total of N calls, "time and time again"
    r"|\bfollow[- ]up (?:letters|calls|emails|e-mails)\b|\btried and tried\b|\bkeeps? (?:on )?(?:trying|call\w*|contact\w*)"
    r"|\bkept (?:trying|calling|contacting|asking|writing)\b|\bcontinued to (?:ask|call|request|contact|dispute|email|write)\b"
    r"|\bvia (?:phone|telephone|mail|e-?mail|fax|letters?)(?:,? (?:and )?(?:phone|telephone|mail|e-?mail|fax|letters?)){2,}"
    r"|\b(?:with|to|through) (?:three|four|five|six|seven|eight|[3-9]) (?:different )?(?:people|representatives|reps|agents"
    r"|supervisors|managers)\b|\b(?:[2-9]|\d\d|two|three|four|five|six)(?: to \d+)?\+? times (?:a|per|each) (?:day|week)\b"
    r"|\btotal of (?:[3-9]|\d\d+) (?:calls?|phone calls|voicemails|letters|disputes)\b|\btime (?:and|&) time again\b"
    r"|\b(?:numerous|multiple|several|countless|many) of times\b|\bcalls? (?:\w+ )?every (?:single )?day\b"
    r"|\b(?:explained|told|called|wrote|written|contacted|emailed)\b[^.]{0,30}\bevery (?:month|week)\b"
    r"|\b(?:constant|continuous|repeated\w*)\b[^.]{0,20}\battempts\b|\bconstantly (?:battling|fighting|disputing)\b"
    r"|\brepeatedly (?:stat\w*|explain\w*|remind\w*)|\bcomplain\w*\b[^.]{0,40}\b(?:several|multiple|numerous|many)"
    r" (?:platforms|places|agencies|times)\b|\btried (?:several|multiple|numerous|many) (?:phone )?numbers\b"
    r"|\breach(?:ed)? out (?:to \w+ (?:\w+ )?)?(?:multiple|several|numerous|many|countless) times\b"
    # the first held-out set: contact that goes on ("have been calling them for a month", "keep sending in proof",
    # "continues to send"), contact made again ("redisputed", "communicated repeatedly"), many contacts said
    # some other way ("a number of complaints", "my previous complaints", "calling my parents a lot")
    r"|\b(?:have|has) been (?:calling|writing|emailing|e-mailing|contacting)\b"
    r"|\b(?:keeps?|kept) (?:on )?(?:sending|writing|emailing|disputing|faxing|mailing|requesting|getting (?:calls|letters))\b"
    r"|\bcontinues to (?:call|send|write|contact|email|mail|dispute)\b|\bre-?disput\w*"
    r"|\b(?:communicated|contacted|called|wrote|disputed|requested|explained)\b[^.!?]{0,40}\brepeatedly\b"
    r"|\b(?:a number of|a lot of|a tremendous amount of|tons of|a series of) (?:\w+,? ){0,4}(?:calls|letters|complaints"
    r"|disputes|emails|correspondence)\b|\b(?:my|our) (?:previous|prior|past|earlier) (?:complaints|disputes|letters)\b"
    r"|\bcall(?:s|ed|ing)? (?:me|us|my \w+) (?:a lot|all the time|nonstop|weekly|every week)\b"
    r"|\b(?:mailed|sent|wrote|called|contacted|disputed)\b[^.!?]{0,60}\b(?:continuously|continually|constantly)\b"
    r"|\b(?:i|we) (?:have )?again (?:reported|called|contacted|wrote|sent|disputed|asked|requested|emailed|mailed)\b"
    r"|\b(?:every ?time|each time) (?:i|we) (?:follow\w* up|write|wrote|ask|asked|reach out)\b"
    r"|\b(?:reached out|called|contacted|wrote|asked|emailed)\b[^.!?]{0,50}\bcountless times\b"
    r"|\b(?:multiple|numerous|several|repeated) (?:previous |prior )?(?:written |certified )?(?:requests|letters|disputes)\b"
    r"|\b(?:[3-9]|three|four|five|six|seven|eight|nine|ten) (?:different|separate) times\b"
    r"|\b(?:reached out|called|contacted|requested|asked|wrote|emailed|disputed)\b[^.!?]{0,50}"
    r"\b(?:several|multiple|numerous|many|countless|[3-9]|\d\d) times?\b|\brepeatedly (?:attempt\w*|tried)\b"
    r"|\b(?:tried|attempted) (?:numerous|several|multiple|many|countless) times?\b|\b(?:tried|attempted) to (?:resolve"
    r"|contact|call|reach|speak|talk)\b[^.!?]{0,40}\b(?:several|multiple|numerous|many|countless) times?\b"
    r"|\b(?:numerous|multiple|several|[3-9]\+|\d\d\+) (?:\([^)]{0,20}\) )?(?:phone )?(?:calls|call ?backs)\b"
    r"|\bcontinue to (?:call|write|contact|send)\b"
    # the second held-out set: calls almost daily, a request made 4-5 times, many different attempts, ignored every
    # time, disputing or submitting once again, a company that keeps hanging up, contact with three individuals
    # or several times, denied four times, contact constantly or several times a day
    r"|\b(?:called|contacted|emailed)\b[^.]{0,40}\b(?:almost|nearly) (?:daily|every day)\b"
    r"|\bthis (?:request|dispute) (?:\d+(?:-\d+)?|three|four|five|several|multiple|numerous) times\b"
    r"|\b(?:many|multiple|several|numerous) different (?:attempts|calls|times|people|departments|representatives)\b"
    r"|\b(?:ignored|denied|refused|rejected) (?:every|each) time\b"
    r"|\bonce again (?:disput\w*|submit\w*|sen[dt]\w*|request\w*)|\bsubmitted\b[^.]{0,60}\bonce again\b"
    r"|\bkeeps? hanging up\b|\bwith (?:three|four|five|[3-9]) individuals\b"
    r"|\bin contact with\b[^.]{0,30}\b(?:several|multiple|numerous|many) times\b"
    r"|\b(?:denied|rejected|refused)\b[^.]{0,20}\b(?:three|four|five|[3-9]) times\b|\bcall\w* (?:me |us )?repeated\w*ly\b"
    r"|\b(?:[2-9]|two|three) or more times (?:a|per|each) day\b"
    r"|\b(?:multiple|several|many|numerous) times (?:a|per|each) (?:day|week)\b"
    r"|\bcontact\w* (?:me |us )?(?:constantly|continuously|continually|nonstop)\b"
    r"|\b(?:contacted|called|wrote to|emailed)\b[^.]{0,40}\bon (?:numerous|multiple|several) occasion\b", _I)
SERVICEMEMBER = re.compile(
    r"\b(?:servicemember|service member|active[- ]duty|veteran|military|deployed|deployment|\bscra\b"
    r"|servicemembers civil relief act|u\.?s\.? (?:army|navy|air force|marine corps|coast guard)"
    r"|(?:the )?(?:army|navy(?! federal)|air force|marine corps|national guard|coast guard)\b"
    # VA benefits and loans ("VA" alone is also Virginia), orders and postings, the services' people
    r"|va (?:loans?|home loans?|mortgage|benefits?|disability|compensation)\b|veterans affairs|gi bill\b"
    r"|dd[- ]?214\b|pcs (?:orders|move|moving)\b|permanent change of station|stationed (?:at|in|overseas|abroad)\b"
    r"|armed forces|g\.i\.(?=\s|$)|gi bill\b|soldier\b|sailor\b|(?:a|the|us|u\.s\.) marines?\b|tricare\b|enlist(?:ed|ing)\b"
    r"|(?:my|to) new command\b|duty station\b)", _I)
OLDER = re.compile(
    r"\b(?:i am|i'm|im|i turned|aged?|at age|at the age of)\s+(?P<age>\d{2})\b(?:\s+years? old)?"
    r"|\b(?P<age2>\d{2})[- ]years?[- ]old (?:me|myself|senior|widow\w*|retiree)\b"
    r"|\b(?:i am|i'm|im|as) an? (?P<age3>\d{2})[- ]years?[- ]old\b"
    r"|\bsenior citizens?\b|\b(?:on|receive|receiving|live on|living on) ssi\b|\bsupplemental security income\b"
    # an elderly relative the consumer looks after is not the consumer (tuning set)
    r"|\b(?:i am|i'm|im|as) a senior\b|(?<!care of my )(?<!caring for my )(?<!care of our )\belderly\b|\bretiree\b"
    r"|\b(?:i am|i'm|im|i was|i have|i've|we are|we're) (?:now |recently |fully |been |semi-)?retired\b"
    r"|\bin retirement\b|\b(?:on|live on|living on) (?:a |my |our )?(?:fixed|retirement) income\b"
    r"|\bsocial security (?:income|benefits?|checks?|payments?|retirement|deposits?)\b|\bmedicare\b"
    r"|\b(?:my|our) pension\b|\b(?:live|living) off (?:of )?(?:my |our )?(?:ssd|ssi|social security)\b"
    # the first held-out set: retirees, retirement income, living on Social Security or "ss income"
    r"|\bretirees\b|\bretire(?:d|ment)? income\b|\b(?:live|living|lives) (?:on|in|off) (?:my |our )?social security\b"
    r"|\bss income\b|\bsocial security garnishment\b", _I)

